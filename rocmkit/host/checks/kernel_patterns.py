"""The kernel-log fault patterns of the `kernel.log` check (checks/kernel_log.py): what each looks like, how bad
it is, how its incident continues over the next lines, and what to do about it.

The regexes are written from the kernel's own format strings (drivers/gpu/drm/amd/amdgpu, drivers/pci/pcie/
{aer,dpc,edr,err}.c, drivers/pci/hotplug/pciehp_ctrl.c, drivers/iommu, mm/oom_kill.c, kernel/hung_task.c,
kernel/rcu/tree_stall.h, kernel/watchdog*.c, kernel/panic.c, arch/x86/kernel/cpu/mce, drivers/edac,
drivers/acpi/apei/ghes.c, drivers/firmware/efi/cper.c, fs/ext4, fs/xfs, block/) and checked against the lines of
tests/data/kernlog/corpus.json (real lines from public ROCm and Linux reports, each with its source).

A pattern matches the first line of an incident. When it has `follow`, the lines after it that match `follow`
(a gap of at most MAX_GAP other lines allowed, up to `span` lines) belong to the same incident, which stops at a
line that starts another pattern's incident (or one of its own, unless `follow` takes that line too) and after a
line matching `end`. An incident is judged `status`, or FAIL when one of its lines matches `worse`."""

from __future__ import annotations

import re
from typing import NamedTuple

from ..model import Status

AER_DOC = "https://docs.kernel.org/PCI/pcieaer-howto.html"
AMDGPU_DOC = "https://docs.kernel.org/gpu/amdgpu/debugging.html"
RAS_DOC = "https://rocm.docs.amd.com/en/latest/how-to/system-debugging.html"
KERNEL_DOC = "https://docs.kernel.org/admin-guide/bug-hunting.html"
MCE_DOC = "https://docs.kernel.org/arch/x86/x86_64/machinecheck.html"
NODE_SCRAPER = "amd/node-scraper, plugins/inband/dmesg (its error patterns)"
DRAIN = "drain the node (scontrol update nodename=NODE state=drain reason=...) and "
MAX_GAP = 2  # unrelated lines tolerated inside an incident (another CPU's messages interleave)

# The lines of a kernel report (an oops, panic, lockup or hung task, and the stack dumps of an RCU stall): the
# call trace (its lines start with a space in /dev/kmsg), registers, modules, taint, and the task line.
TRACE = (r"^(?:\s|\? |Call [Tt]race:|CPU: \d+ U?PID:|Hardware name:|Workqueue:|RIP:|R(?:[A-Z]{2}|\d\d):|"
         r"[ECDFG]S:|CR[02]:|DR[0-7]:|PKRU:|Code:|Modules linked in:|Tainted:|Not tainted|\"echo 0 >|task:|"
         r"---\[ end|PGD |P4D |#PF:|Oops:|note:|Kernel Offset:|Stack:|irq event stamp:|hardirqs |softirqs |"
         r"Sending NMI|NMI backtrace|Task dump|</?(?:TASK|IRQ|NMI)>|\S+\s+D\s+\d+\s+\d+|"
         r"rcu: (?!INFO:)|\s*\(detected by|\s*\(t=\d+ jiffies)")


class LazyRegex:
    """A regex compiled the first time it is searched: a clean log tries few of the table's regexes (a line must
    hold one of a pattern's keys first), and compiling all of them when the doctor starts costs ~7 ms, a tenth
    of its whole run."""

    __slots__ = ("pattern", "_compiled")

    def __init__(self, pattern: str):
        self.pattern = pattern
        self._compiled: re.Pattern | None = None

    def compiled(self) -> re.Pattern:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern)
        return self._compiled

    def search(self, text: str) -> re.Match | None:
        return self.compiled().search(text)


class Pattern(NamedTuple):
    """One fault of the table below: how its incident starts, continues and ends, and what to do about it."""

    id: str  # kernel.log.<name>
    status: Status  # FAIL: it kills a job or marks the hardware bad; WARN: it degrades, or it may have recovered
    regex: LazyRegex  # the first line of an incident
    keys: tuple[str, ...]  # lower-case words one of which a matching line contains: a cheap test before the regex
    title: str
    fix: str
    ref: str
    follow: LazyRegex | None = None  # the incident's further lines (None: one line is the incident)
    end: LazyRegex | None = None  # a line that closes the incident (it belongs to it)
    worse: LazyRegex | None = None  # a line that makes the incident a FAIL
    span: int = 64  # lines after the first that an incident may reach
    alone: bool = False  # its lines count only outside another pattern's incident (a dump's detail lines seen
    #                      without their header); they never cut another incident short


    @property
    def name(self) -> str:
        return self.id.rsplit(".", 1)[1]

    @property
    def severity(self) -> str:
        """As the docs table says it: `fail`, `warn`, or `warn/fail` (warn, fail when the incident is `worse`)."""
        return self.status.value + ("/fail" if self.worse is not None and self.status != Status.FAIL else "")


class Incident(NamedTuple):
    """One fault: its first line, the lines that belong to it (a dump, a call trace), and whether one of them
    made it a FAIL (the pattern's `worse`)."""
    lines: tuple  # of facts.kernlog.Record
    worse: bool = False


def _p(name: str, status: Status, keys: str, regex: str, title: str, fix: str, ref: str = NODE_SCRAPER, *,
       follow: str | None = None, end: str | None = None, worse: str | None = None, span: int = 64,
       alone: bool = False) -> Pattern:
    c = (lambda r: None if r is None else LazyRegex(r))
    return Pattern(f"kernel.log.{name}", status, LazyRegex(regex), tuple(keys.split("|")), title, fix, ref,
                   c(follow), c(end), c(worse), span, alone)


# STATUS of an MCA/ACA bank: bit 61 (UC, the first hex digit's 2s bit) is an uncorrected error, bit 44 a deferred
# one (the fifth digit's 1s bit).
_UC_STATUS = r"0x(?:[2367abefABEF][0-9a-fA-F]{15}|[0-9a-fA-F]{4}[13579bdfBDF][0-9a-fA-F]{11})\b"

# Failures first: a finding's order is the table's. AER's words changed in Linux 6.x ("Uncorrected"/"Corrected"
# became "Uncorrectable"/"Correctable"): both are matched.
PATTERNS: tuple[Pattern, ...] = (
    _p("gpu_init", Status.FAIL, "fail|fatal error|discovery|atombios stuck",
       r"Fatal error during GPU init|\*ERROR\* (?:hw|sw|early)_init of IP block <\w+> "
       r"failed|amdgpu: .*hw_init of IP block .* failed|amdgpu_device_ip_init failed"
       # drivers/base/dd.c: 5.x pr_warn "%s: probe of %s failed", 6.x dev_err "probe with driver %s failed"
       r"|^amdgpu: probe of \S+ failed with error|^amdgpu \S+: probe with driver amdgpu failed with error"
       # amdgpu_discovery.c and atom.c
       r"|invalid ip discovery (?:binary|data table)|amdgpu_discovery_init failed|failed to read ip discovery"
       r"|atombios stuck (?:in loop|executing)",
       "amdgpu failed to initialise a GPU (an IP block, a ring or IB test, IP discovery, the VBIOS or the probe "
       "failed)",
       "check the firmware package matches the driver (amdgpu-dkms and linux-firmware from one ROCm release), "
       "then cold-boot the node; if it repeats, " + DRAIN + "report it to the vendor", AMDGPU_DOC),
    _p("gpu_reset_failed", Status.FAIL, "fail|reset",
       r"(?:GPU|ASIC|[Mm](?:ODE|ode) ?[12]|BACO|[Rr]ing \S+) reset(?:\(\d+\))? failed|GPU Recovery Failed"
       r"|Failed to (?:enter|exit) BACO state|GPU reset end with ret = -\d+",
       "a GPU reset failed (a failed queue reset escalates to a full one; a failed full reset leaves the GPU hung "
       "until the node reboots)",
       DRAIN + "reboot it if the GPU stays hung (look for a kernel.log.gpu_reset that succeeded after it)",
       AMDGPU_DOC),
    _p("ip_block_resume", Status.FAIL, "fail",
       r"\b(?:suspend|resume|hw_fini|late_init) of IP block <\w+> failed"
       r"|amdgpu_device_ip_(?:resume|suspend|late_init) failed",
       "a GPU IP block failed to suspend, resume or finish its init (after a reset, a runtime-PM wake or a "
       "suspend: the GPU is unusable until it is reset)",
       "look at the SMU/PSP lines before it (kernel.log.smu, kernel.log.psp); disable runtime PM "
       "(amdgpu.runpm=0) on compute nodes, install one ROCm release's amdgpu-dkms and firmware; if it repeats, "
       + DRAIN + "cold-boot it", AMDGPU_DOC),
    _p("kfd_device", Status.FAIL, "rejects atomics|not added",
       r"\bskipped device \S+, PCI rejects atomics|\bdevice \S+ NOT added due to errors",
       "the compute driver (KFD) refused a GPU: ROCm cannot use it (PCIe atomics not routed to it, or its init "
       "failed)",
       "for atomics: put the GPU in a slot whose root port routes PCIe AtomicOps (`lspci -vvv`: AtomicOpsCap, "
       "AtomicOpsCtl), with no switch or riser that drops them, and check the BIOS; otherwise read the amdgpu lines "
       "before it", "https://rocm.docs.amd.com/en/latest/conceptual/pcie-atomics.html"),
    _p("ras_fatal", Status.FAIL, "hardware error", r"(?i)\buncorrectable hardware error\s*\(\s*\w+\s*\) detected",
       "a fatal RAS interrupt (e.g. ERREVENT_ATHUB_INTERRUPT on MI300X): the GPU hung and needs a reset",
       DRAIN + "read the ACA dump that follows it (kernel.log.ras_aca) and the RAS counts (amd-smi metric --ecc); "
               "if it repeats on one GPU, replace it", RAS_DOC),
    _p("ras_uncorrectable", Status.FAIL, "correct|fatal error|hardware error",
       r"[Uu]ncorrectable hardware errors? detected"
       r"|\bRAS\b.*\buncorrectable|GPU detected ECC Fatal Error|[Dd]eferred hardware errors? detected",
       "uncorrectable (or deferred) RAS/ECC errors: GPU memory or a block is failing",
       DRAIN + "read the bad pages (amd-smi bad-pages) and RAS counts (amd-smi metric --ecc); replace the GPU "
       "if retired pages keep growing", RAS_DOC),
    _p("ras_poison", Status.FAIL, "poison", r"(?i)\bpoison is consumed by client \d+|\bpoison is created\b",
       "poisoned GPU memory was created or consumed (an uncorrectable error reached a client; the GPU is reset)",
       DRAIN + "read the bad pages (amd-smi bad-pages); the job that consumed the poison died", RAS_DOC),
    _p("ras_bad_page_threshold", Status.FAIL, "threshold|replace this gpu",
       r"(?i)\bSaved bad pages\s*\(?\d+\)?\s*reaches threshold value|\bRAS records:\s*\d+ exceed threshold"
       r"|GPU will not be initialized\. Replace this GPU",
       "the GPU's retired (bad) pages reached the RAS threshold: the GPU is marked for replacement (RMA)",
       DRAIN + "replace the GPU (AMD's Service Action Guide); amdgpu.bad_page_threshold only hides it", RAS_DOC),
    _p("aer_uncorrected", Status.FAIL, "correct|fail",
       r"PCIe Bus Error: severity=Uncorrect(?:ed|able)"
       r"|AER: (?:Multiple )?Uncorrect(?:ed|able) \((?:Non-)?Fatal\) error (?:message )?received"
       r"|AER: (?:device recovery failed|subordinate device reset failed)",
       "uncorrectable PCIe errors (AER): a GPU or NIC link lost data",
       DRAIN + "reseat or replace the device or riser the AER lines name (its PCI address); check "
       "`lspci -vvv -s ADDR` for LnkSta and the AER status registers", AER_DOC,
       follow=r"PCIe Bus Error:|error status/mask=|^\s+\[\s*\d+\]|TLP Header:|AER:\s+\[\s*\d+\]", span=12),
    _p("pcie_link_down", Status.FAIL, "pciehp",
       r"(?i)\bpciehp\b.*\bslot\(\S+\): (?:Link Down|Card not present)",
       "a PCIe slot's link went down (the GPU or NIC behind it fell off the bus)",
       DRAIN + "reseat or replace the device, riser or cable of that slot; a GPU that fell off needs a cold boot",
       AER_DOC),
    _p("pcie_dpc", Status.FAIL, "dpc:|edr:", r"\bDPC: (?:containment event|.*\bdetected\b)|\bEDR: (?:EDR event "
       r"received|.*\bfail)",
       "PCIe Downstream Port Containment cut a link after an uncorrectable error (DPC/EDR)",
       DRAIN + "reseat or replace the device below that port; check `lspci -vvv` for it and its AER status",
       AER_DOC),
    _p("thermal_shutdown", Status.FAIL, " ctf|temperature",
       r"(?i)\bover temperature range\((?:SW|HW) CTF\) detected|\bshutdown due to (?:GPU )?(?:SW|HW) CTF"
       r"|\bcritical temperature reached\b",
       "a GPU or thermal zone reached its critical temperature (the node shuts down)",
       DRAIN + "check the cooling (fans, airflow, inlet temperature) before it runs jobs again", AMDGPU_DOC),
    _p("oom", Status.FAIL, "kill",
       r"\binvoked oom-killer:|\bOut of memory: Kill(?:ed)? process"
       r"|\bMemory cgroup out of memory: Killed process|\bOut of memory and no killable processes"
       r"|^Killed process \d+ \(",  # 4.x printed the victim on a line of its own
       "the kernel's OOM killer killed a process (host memory ran out, or a cgroup's limit)",
       "give the job more host memory (or a larger cgroup/container limit), or fewer data-loader workers; the "
       "Killed process line names the victim", KERNEL_DOC, follow=r".", end=r"\bKilled process \d+", span=400),
    _p("panic", Status.FAIL, "kernel panic", r"^Kernel panic - not syncing",
       "the kernel panicked (the node crashed and rebooted, or stopped)",
       DRAIN + "read the lines before the panic (the oops, lockup or machine check that caused it)", KERNEL_DOC,
       follow=TRACE),
    _p("oops", Status.FAIL, "bug|oops: |fault|unable to handle kernel",
       r"^(?:BUG: (?:unable to handle|kernel NULL pointer|Bad page|scheduling while atomic|KASAN)|Oops: "
       r"|general protection fault, probably for|general protection fault: [0-9a-f]{4} \[#|kernel BUG at \S+!"
       r"|Unable to handle kernel )",
       "a kernel oops or BUG (the task that hit it died; the kernel may hold locks it never releases)",
       DRAIN + "reboot it; the call trace names the driver (report it with the kernel version)", KERNEL_DOC,
       follow=TRACE),
    _p("lockup", Status.FAIL, "lockup", r"\bBUG: soft lockup - CPU#\d+ stuck for|\bWatchdog detected hard LOCKUP",
       "a CPU soft or hard lockup (a CPU stuck in the kernel for tens of seconds)",
       DRAIN + "reboot it; the call trace names the stuck driver", KERNEL_DOC, follow=TRACE),
    _p("rcu_stall", Status.FAIL, "stall",
       r"\brcu_\w+(?:_state)? (?:self-)?detected (?:expedited )?stalls?\b",
       "an RCU stall (a CPU or task did not let RCU make progress: the kernel is stuck somewhere)",
       DRAIN + "reboot it; the stall's stack dump names the culprit", KERNEL_DOC, follow=TRACE),
    _p("hung_task", Status.FAIL, "blocked for more than", r"\bINFO: task \S+ blocked for more than \d+ seconds",
       "a task hung in the kernel for minutes (uninterruptible sleep: a GPU fence, a filesystem, a driver)",
       "the call trace says where it waits (amdgpu_* or dma_fence_* means a GPU hang: look for "
       "kernel.log.ring_timeout); if it does not clear, " + DRAIN + "reboot it", KERNEL_DOC, follow=TRACE),
    _p("mce", Status.WARN, "machine check|hardware error|cmci storm",
       r"\bMachine Check(?: Exception)?: [0-9a-fA-F]+ Bank \d+: [0-9a-fA-F]{16}|\bMachine check events logged"
       r"|\[Hardware Error\]: (?:Corrected error, no action required|Uncorrected, |Deferred error)"
       r"|\[Hardware Error\]: CPU:?\s*\d+ \([0-9a-f:]+\) MC\d+_STATUS\[|\bCMCI storm detected",
       "CPU machine-check errors (MCE): corrected ones warn, uncorrected ones fail",
       "decode them (rasdaemon: ras-mc-ctl --errors; or mcelog); corrected errors that repeat on one CPU or DIMM, "
       "and any uncorrected one: " + DRAIN + "have the part replaced", MCE_DOC,
       follow=r"\[Hardware Error\]:", span=24,
       worse=r"Bank \d+: [2367abefABEF][0-9a-fA-F]{15}\b|\bUncorrected\b|\|UE\||\bDeferred error"
             r"|Processor context corrupt"),
    _p("edac", Status.WARN, "edac mc", r"\bEDAC MC\d+: \d+ (?:CE|UE) ",
       "host memory ECC errors (EDAC): corrected ones warn, uncorrected ones fail",
       "find the DIMM (the EDAC line names it; ras-mc-ctl --error-count); replace it if its count grows, or "
       "at once for an uncorrected (UE) error", MCE_DOC, worse=r"\bEDAC MC\d+: \d+ UE "),
    _p("fs_error", Status.FAIL, "ext4-fs|xfs (|btrfs",
       r"\bEXT4-fs error \(device|\bEXT4-fs \(\S+\): (?:Remounting filesystem read-only|I/O error)"
       r"|\bXFS \(\S+\): (?:Corruption|Metadata corruption|metadata I/O error|Filesystem has been shut down|"
       r"[Ll]og I/O [Ee]rror|xfs_do_force_shutdown)|\bBTRFS (?:error|critical) \(device",
       "filesystem errors (a filesystem found corruption, or shut down or went read-only)",
       DRAIN + "check the disk (smartctl, nvme smart-log) and fsck/xfs_repair the filesystem", KERNEL_DOC),
    _p("ras_aca", Status.WARN, "hardware error",
       r"(?i)\[Hardware Error\]:?\s*Accelerator Check Architecture events logged",
       "an ACA (Accelerator Check Architecture) error dump from a GPU: corrected ones warn, uncorrected ones fail",
       "the RAS line before it says what happened; keep the dump (STATUS, IPID, SYND) for the vendor; "
       "repeated dumps on one GPU: " + DRAIN + "check amd-smi metric --ecc", RAS_DOC,
       follow=r"(?i)\[Hardware Error\]:?\s*(?:aca entry\[\d+\]|ACA\[\d+/\d+\])\.\w+=", span=16,
       worse=r"(?i)\.STATUS=" + _UC_STATUS),
    _p("ghes", Status.WARN, "hardware error",
       r"\bHardware error from APEI Generic Hardware Error Source: \d+",
       "a firmware-first hardware error (APEI GHES / UEFI CPER): corrected ones warn, others fail",
       "the record names the section (PCIe, memory, processor) and the device; for a PCIe one, reseat or replace "
       "the device it names; repeated ones: " + DRAIN + "read the BMC's event log", AER_DOC,
       follow=r"\[Hardware Error\]:", span=40, worse=r"event severity: (?:recoverable|fatal)"),
    _p("aer_firmware", Status.WARN, "aer_", r"\baer_status: 0x[0-9a-fA-F]+, aer_mask: 0x",
       "PCIe errors reported firmware-first (the AER registers from a CPER record): corrected ones warn, "
       "uncorrectable ones fail",
       "the aer_layer/aer_agent lines name the failing link; reseat or replace the device at that address; check "
       "`lspci -vvv -s ADDR`", AER_DOC, follow=r"\baer_\w+|AER:\s+\[\s*\d+\]|^\s+\[\s*\d+\]|TLP Header:", span=12,
       worse=r"\baer_uncor_severity:"),
    _p("aer_detail", Status.WARN, "status/mask=|aer_|error of this agent",
       r"\berror status/mask=[0-9a-fA-F]{8}/|\baer_(?:cor|uncor)_status: 0x|\baer_layer=|\baer_uncor_severity:"
       r"|AER:\s+Error of this Agent is reported first",
       "PCIe AER detail lines seen without their header (the status registers of a PCIe error whose first line "
       "was lost, filtered or printed by firmware): corrected ones warn, uncorrectable ones fail",
       "the lines name the device (its PCI address); reseat or replace it if they repeat; check `lspci -vvv -s ADDR` "
       "for its AER status", AER_DOC, alone=True, span=12,
       follow=r"\berror status/mask=|\baer_\w+|AER:\s+\[\s*\d+\]|^\S+ [0-9a-fA-F:.]+:?\s+\[\s*\d+\] |TLP Header:",
       worse=r"\baer_uncor_status: 0x(?!0{8})|\baer_uncor_severity:"),
    _p("io_error", Status.WARN, "i/o error", r"\bBuffer I/O error on dev(?:ice)? (?!sr\d|fd\d|loop)"
       r"|\bI/O error, dev (?!sr\d|fd\d|loop)",
       "block I/O errors on a disk (reads or writes failed)",
       "check the disk (smartctl -a, nvme smart-log) and its cabling; replace it if errors repeat", KERNEL_DOC),
    _p("gpu_reset", Status.WARN, "reset", r"GPU reset begin|Issuing Whole GPU reset|GPU reset\(\d+\) succeeded"
       r"|\b(?:MODE[12]|BACO) reset\s*$|\bGPU (?:psp |smu )?mode1 reset\s*$|Starting \S+ ring reset"
       r"|GPU reset succeeded, trying to resume|VRAM is lost due to GPU reset|GPU reset end with ret = 0\b",
       "a GPU was reset since boot (a hang or a fatal error recovered by the driver)",
       "find the job that hung it (the ring-timeout lines name the process); if resets repeat, " + DRAIN
       + "check its RAS counts", AMDGPU_DOC),
    _p("ring_timeout", Status.WARN, "timeout", r"(?i)\bring \S+ timeout\b",
       "a GPU ring (queue) timed out: a kernel or copy hung the GPU",
       "the line names the process; a driver/firmware mismatch or a bad kernel build also does this: check "
       "`rocmkit doctor --level 2`, and if timeouts repeat on this node only, " + DRAIN + "look at its RAS counts",
       AMDGPU_DOC),
    _p("page_fault", Status.WARN, "fault",
       r"\[(?:gfxhub|mmhub)\w*\] (?:retry |no-retry )?page fault|VM_L2_PROTECTION_FAULT_STATUS|GPU fault detected:",
       "a GPU page fault (an access outside a process's GPU memory)",
       "usually a bug in the faulting program (the line names its pid and process); on a node where it repeats "
       "with different programs, check the RAS counts and bad pages", AMDGPU_DOC,
       follow=r"(?i)\bfor process |\bin process |\bProcess \S+ pid|in page starting at address|_PROTECTION_FAULT_"
              r"|Faulty UTCL2 client ID|MORE_FAULTS|WALKER_ERROR|PERMISSION_FAULTS|MAPPING_ERROR|\bRW: 0x"
              r"|VM fault \(", span=16),
    _p("sq_intr", Status.WARN, "sq_intr|se_id", r"(?i)\bsq_intr: error\b|\bSQ .{1,30} detected: se_id \d+",
       "shader (SQ) error interrupts: a GPU kernel hit an illegal instruction, memory violation or ECC error",
       "usually the job's kernel (the HIP error of that job says which); repeated ones with different jobs on one "
       "GPU: check its RAS counts", AMDGPU_DOC),
    _p("xgmi", Status.WARN, "xgmi", r"(?i)\bxgmi\b.*\b(?:error|fail(?:ed|ure)?)\b",
       "xGMI (GPU-to-GPU link) errors: a hive link is degraded or failed to set up",
       "run `rocmkit doctor --level 2` (all-reduce and P2P figures); if a link is slow or the hive is "
       "incomplete, " + DRAIN + "cold-boot it"),
    _p("firmware", Status.WARN, "fail", r"amdgpu.*[Ff]ailed to load (?:gpu_info )?firmware|firmware load for "
       r"amdgpu/\S+ failed|PSP firmware loading failed|PSP load \w+ failed|[Ff]ailed to load ucode \w+"
       r"|psp gfx command LOAD_IP_FW\S* failed"
       # amdgpu_psp.c, psp_v*.c, gmc_v*.c, amdgpu_ucode.c
       r"|\bfail(?:ed)? to (?:request/validate|validate|init(?:ialize)?) \w+ (?:microcode|firmware)"
       r"|\bFailed to load (?:psp|\w+) firmware!|\bfailed to load ucode id",
       "amdgpu could not load a firmware file (or the PSP refused one)",
       "install the linux-firmware / amdgpu firmware of the ROCm release that matches the driver, then "
       "update-initramfs -u and reboot (a required firmware also shows as kernel.log.gpu_init)", AMDGPU_DOC),
    _p("smu", Status.WARN, "fail|smu: |smc ",
       r"SMU: I'm not done with your previous command|Msg issuing pre-check failed|SMU: response:0x"
       r"[0-9a-fA-F]+ for index|Failed to export SMU metrics table|SMU: No response|failed to send message \d+"
       r"|last message was failed|Fail(?:ed)? to disable (?:smu|dpm) features"
       r"|\bFailed to send message (?:0x)?[0-9a-fA-F]+, response|SMC engine is not correctly up|\bSMC is not ready"
       r"|\[powerplay\].*\b[Ff]ailed\b",
       "the GPU's power-management firmware (SMU) did not answer or refused a command",
       "often what comes before a GPU hang or reset; a driver/firmware mismatch also does this: install one "
       "ROCm release's amdgpu-dkms and firmware; if it repeats on one GPU, " + DRAIN + "cold-boot it", AMDGPU_DOC),
    _p("psp", Status.WARN, "fail|psp reg", r"[Pp]sp (?:gfx )?command (?!LOAD_TA|INVOKE_CMD|LOAD_IP_FW)\S* ?failed and "
       r"response status|psp reg \(0x[0-9a-fA-F]+\) wait timed out|PSP (?:create ring|load tmr) failed"
       r"|Failed to terminate (?:tmr|\w+ ta)\b",
       "the GPU's security processor (PSP) failed a command or timed out",
       "often during a reset or resume; a driver/firmware mismatch also does this: install one ROCm release's "
       "amdgpu-dkms and firmware; if it repeats, " + DRAIN + "cold-boot it", AMDGPU_DOC),
    _p("kfd", Status.WARN, "fail|unrecoverable|timeout|time out",
       r"\b(?:amd)?kfd\b.*\bfail(?:ed|ure)?\b|[Ff]ailed to (?:quiesce|resume) (?:KFD|kfd)|[Ff]ailed to evict "
       r"(?:process )?queues?|Queue preemption (?:failed|time ?out)|cp might be in an unrecoverable state"
       r"|qcm fence wait loop timeout|MES failed to respon(?:d|se)|MES might be in unrecoverable state"
       r"|[Ff]ailed to (?:remove|unmap) (?:hardware |legacy )?queue|[Ff]ailed to (?:suspend|restore) process",
       "the compute (KFD) driver or the MES scheduler failed to preempt, evict or remove queues",
       "often what comes before a GPU reset: look for kernel.log.gpu_reset; update the driver and firmware (one "
       "ROCm release) if it repeats without one", AMDGPU_DOC),
    _p("iommu_fault", Status.WARN, "event logged [|dmar: |fault",
       r"\bAMD-Vi: Event logged \[|\bIO_PAGE_FAULT\b|\bDMAR: \[DMA (?:Read|Write)|\bDMAR: DRHD: handling fault",
       "IOMMU faults: a device's DMA hit an address the IOMMU does not map",
       "for a GPU: boot with iommu=pt (AMD's MI300X guide) and check the driver; for other devices the line "
       "names the PCI address", AMDGPU_DOC),
    _p("thermal", Status.WARN, "throttl|temperature",
       r"(?i)\btemperature (?:is )?above threshold, cpu clock (?:is )?throttled|\bGPU is throttled\b"
       r"|\bGPU thermal throttling temperature reached|\bGPU over temperature range detected",
       "thermal or power throttling (a GPU or CPU ran slower than its clocks allow)",
       "check the cooling and power (fans, inlet temperature, PSU, the BMC's sensors); the GPU line names the "
       "throttler (VR, PPT, THM...)", AMDGPU_DOC),
    _p("aer_corrected", Status.WARN, "correct", r"PCIe Bus Error: severity=Correct(?:ed|able)"
       r"|AER: (?:Multiple )?Correct(?:ed|able) error (?:message )?received",
       "corrected PCIe errors (AER): a link retrains or replays (its bandwidth drops)",
       "a few are normal; many on one device mean a marginal link: reseat it, check LnkSta with "
       "`lspci -vvv -s ADDR`", AER_DOC,
       follow=r"PCIe Bus Error: severity=Correct|error status/mask=|^\s+\[\s*\d+\]|AER:\s+\[\s*\d+\]", span=12),
    _p("ras_correctable", Status.WARN, "hardware error",
       r"(?i)(?<!un)\bcorrectable hardware errors? detected(?: in total)? in \w+ block",
       "correctable RAS/ECC errors on a GPU (corrected; many of them predict an uncorrectable one)",
       "watch the count (amd-smi metric --ecc); a GPU whose count keeps rising: " + DRAIN + "check its bad pages",
       RAS_DOC),
    _p("ras_page_retired", Status.WARN, "error address", r"\bError Address\(PA\):\s*0x[0-9a-fA-F]+",
       "GPU memory pages were retired after an ECC error (one line per page)",
       "read the bad pages (amd-smi bad-pages); the GPU is replaced when they reach the threshold "
       "(kernel.log.ras_bad_page_threshold)", RAS_DOC),
    # amdgpu_ring.c/amdgpu_ib.c and gfx_v*.c: at init the ring stays unusable (a fatal one also gives gpu_init);
    # during a reset it is the hang being recovered
    _p("ring_test", Status.WARN, "fail",
       r"\bring \S+ test failed\b|\bIB test failed on \S+|\bfailed testing IB on ring|\bib ring test failed",
       "a GPU ring or IB (command buffer) test failed: that engine does not execute commands",
       "at boot: install one ROCm release's amdgpu-dkms and firmware and cold-boot the node; during a reset, "
       "look for the gpu_reset or gpu_reset_failed that follows; if it repeats, " + DRAIN + "check it", AMDGPU_DOC),
    _p("cp_hang", Status.WARN, "fail",
       r"\bK[CGI]Q (?:disable|enable) failed|\bfailed to halt cp\b",
       "the GPU's command processor did not stop or start its queues (CP halt, KIQ/KCQ enable or disable failed): "
       "a hung GPU, usually during a reset or unload",
       "look for the kernel.log.gpu_reset or gpu_reset_failed that follows; if it repeats, " + DRAIN
       + "cold-boot it", AMDGPU_DOC),
    # kernel/panic.c __warn: "WARNING: CPU: %d PID: %d at %pS" (6.x adds the file:line); only the GPU stack's
    _p("gpu_warning", Status.WARN, "warning: ",
       r"^WARNING: (?:CPU: \d+ PID: \d+ at )?(?:\S*drivers/gpu/drm/"
       r"|.*\[(?:amdgpu|amdkfd|amdxcp|amdttm|amddrm_\w+|amd_sched|gpu_sched)\])",
       "a kernel WARNING inside the GPU driver (amdgpu, its scheduler or TTM): a driver bug hit, often during init, "
       "a reset or teardown",
       "the call trace names the function; report it with the kernel and amdgpu-dkms versions; if the GPU "
       "misbehaves after it, " + DRAIN + "reboot it", KERNEL_DOC, follow=TRACE),
    # arch/x86/mm/fault.c show_signal_msg and arch/x86/kernel/traps.c: a user process killed by the kernel
    _p("user_fault", Status.WARN, "fault|] trap ",
       r"\[\d+\]: segfault at [0-9a-f]+ ip [0-9a-fx]+ sp [0-9a-fx]+ error"
       r"|\[\d+\] general protection fault ip:[0-9a-f]+ sp:|\[\d+\] trap [\w ]+ ip:[0-9a-f]+ sp:",
       "a process was killed by a segfault, general-protection fault or trap (the line names the library: in "
       "libamdhip64, libhsa-runtime64 or another ROCm library it is the GPU stack that crashed)",
       "for a ROCm library: check that the runtime matches the driver and the GPU (rocmkit doctor; HIP/ROCm "
       "versions of the job's image); otherwise it is the program's own bug", KERNEL_DOC, follow=r"^Code: ", span=2),
    _p("rt_throttling", Status.WARN, "throttl", r"\bsched: RT throttling activated",
       "the scheduler throttled real-time tasks (an RT task ran 95% of a period: other tasks, watchdogs and "
       "interrupts' threads starved)",
       "find the SCHED_FIFO/RR task that spins (ps -eLo rtprio,comm | sort -n); a busy-polling RT thread on a "
       "training node stalls the GPU driver's work", "https://docs.kernel.org/scheduler/sched-rt-group.html"),
    _p("journal_corrupt", Status.WARN, "systemd-journald",
       r"systemd-journald\[\d+\]: .*(?:corrupted or uncleanly shut down|[Jj]ournal file corrupted"
       r"|is truncated, ignoring)",
       "the systemd journal found a corrupted or uncleanly closed file (the node crashed or lost power, or its disk "
       "fails): that boot's log is partly lost",
       "look at the previous boot's end (journalctl -b -1 -e) for the crash; check the disk (smartctl)",
       "https://www.freedesktop.org/software/systemd/man/latest/systemd-journald.service.html"),
    # Lustre's CERROR/CNETERR console prefixes and its client's recovery messages (lustre/ptlrpc, lnet/klnds)
    _p("lustre", Status.WARN, "lustre|lnet",
       r"^(?:LustreError|LNetError): |^Lustre: .*(?:Connection to \S+ \(at \S+\) was lost|@@@ Request sent has "
       r"(?:failed due to network error|timed out)|\bevicted\b)|^LNet: .*\bTimed out tx\b",
       "Lustre or LNet errors: the parallel filesystem or its network lost a server, timed out or evicted this "
       "client (jobs block on I/O, checkpoints fail)",
       "check the fabric (ibstat, lnetctl ping to the server's NID) and the servers' state with the storage team; "
       "an evicted client needs its mounts checked (lfs check servers)", "https://doc.lustre.org/lustre_manual.xhtml",
       follow=r"^(?:Lustre|LNet|LustreError|LNetError): .*Skipped \d+ previous similar messages", span=4),
)
