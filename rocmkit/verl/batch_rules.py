"""verl 0.9.1's batch, placement and value rules that it asserts only after start-up (once Ray, the models and the
first rollout have run), checked on the composed configuration instead, each with the nearest values that pass.

Pure and stdlib only: config_check.py imports it beside itself in the target Python (recipe_check copies both).
Each rule names the verl source (verl 0.9.1, its default V1 sync trainer and model-engine workers) it mirrors:

- the trainer pads each step's batch of train_batch_size x rollout.n samples up to a multiple of
  lcm(actor data-parallel size, actor mini batch x n, critic mini batch x n)
  (verl/trainer/ppo/v1/trainer_base.py, PPOTrainer._get_required_batch_multiple) and deals it out evenly, so each
  data-parallel rank holds batch / dp samples for its log-prob passes;
- the update hands the workers a mini batch of ppo_mini_batch_size x n samples, which must split evenly over the
  data-parallel ranks (verl/workers/engine_workers.py, TrainingWorker.train_mini_batch);
- without dynamic batching, each micro batch must divide what the rank holds: the mini batch per rank for the
  update, the whole share for log-probs (verl/workers/engine/utils.py, prepare_micro_batches);
- data-parallel size: GPUs / Ulysses SP for FSDP (verl/workers/engine/fsdp/transformer_impl.py,
  get_data_parallel_size) and VeOmni (its veomni.ulysses_parallel_size, verl/workers/engine/veomni/
  transformer_impl.py), GPUs / (TP x PP x CP) for Megatron (megatron-core's parallel state).
"""

from __future__ import annotations

import heapq
import itertools
import math
import re
from dataclasses import dataclass, field

A, R, REF, C = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.ref", "critic"
GPUS_KEYS = ("trainer.n_gpus_per_node", "trainer.nnodes")


@dataclass
class Problem:
    """One finding: the keys it is about (the first is where it is said), the reason, the values that pass."""
    rule: str
    keys: tuple
    message: str
    fix: str | None = None
    severity: str = "error"
    source: str | None = None  # the verl file and function the rule mirrors

    def to_json(self) -> dict:
        text = self.message + (f" ({self.source})" if self.source else "")
        return {"rule": self.rule, "keys": list(self.keys), "message": text, "fix": self.fix,
                "severity": self.severity,
                "text": text if not self.keys or text.startswith(self.keys[0]) else f"{self.keys[0]}: {text}"}


def _int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _choices(values: list[int], limit: int = 4) -> str:
    return " or ".join(str(v) for v in values[:limit]) or "none nearby: change the GPU count"


def near(target: int, ok, lo: int = 1, hi: int | None = None, limit: int = 2) -> list[int]:
    """Up to `limit` passing values below `target` and `limit` above (within lo..hi), ascending."""
    hi = hi if hi is not None else max(4 * abs(target), 64)
    below = [v for v in range(min(target, hi), lo - 1, -1) if ok(v)][:limit]
    above = [v for v in range(max(target, lo - 1) + 1, hi + 1) if ok(v)][:limit]
    return sorted(set(below + above))


def divisors_near(n: int, target: int) -> list[int]:
    divs = sorted({d for i in range(1, math.isqrt(n) + 1) if n % i == 0 for d in (i, n // i)})
    below = [d for d in divs if d <= target][-2:]
    above = [d for d in divs if d > target][:2]
    return below + above


# ---- the values, read once ----

@dataclass
class Shape:
    get: object  # key -> value (None where absent)
    problems: list = field(default_factory=list)

    def whole(self, key: str, minimum: int = 1, optional: bool = False, what: str = "a whole number"):
        """The key's value as an int >= minimum, or None after saying what is wrong with it."""
        v = self.get(key)
        if v is None and optional:
            return None
        n = _int(v)
        if n is None:
            self.problems.append(Problem("range", (key,), f"{key}={v}: must be {what} >= {minimum}"))
        elif n < minimum:
            self.problems.append(Problem("range", (key,), f"{key}={v}: must be >= {minimum}",
                                         fix=f"{key}={minimum} or more"))
            return None
        return n


def problems(get, use_critic: bool = False, use_reference: bool = False) -> list[dict]:
    """Every rule on one composed config; get(key) returns the resolved value or None. Values out of range stop
    the arithmetic that would use them (no ZeroDivisionError for nnodes=0, no TypeError for a batch of 'abc').
    The fixes are checked against every rule together (joint_fixes): each rule alone names values that pass it,
    and two such fixes (a train batch for one rule, a mini batch for another) may fail together."""
    found = [p.to_json() for p in _found(get, use_critic, use_reference)]
    return joint_fixes(found, get, lambda g: _found(g, use_critic, use_reference))


def _found(get, use_critic: bool, use_reference: bool) -> list[Problem]:
    s = Shape(get)
    per_node, nodes = s.whole("trainer.n_gpus_per_node"), s.whole("trainer.nnodes")
    train, n = s.whole("data.train_batch_size"), s.whole(f"{R}.n")
    dynamic = bool(get(f"{A}.use_dynamic_bsz"))
    mini = s.whole(f"{A}.ppo_mini_batch_size")
    micro = s.whole(f"{A}.ppo_micro_batch_size_per_gpu", optional=True)
    lp_micro = s.whole(f"{R}.log_prob_micro_batch_size_per_gpu", optional=True)
    ref_micro = s.whole(f"{REF}.log_prob_micro_batch_size_per_gpu", optional=True) if use_reference else None
    strategy = get(f"{A}.strategy")
    if strategy == "megatron":
        split = [s.whole(f"{A}.megatron.{k}_parallel_size") for k in ("tensor_model", "pipeline_model", "context")]
        sp = None if None in split else math.prod(split)
    elif strategy == "veomni":  # VeOmniEngine.get_data_parallel_size: world // its own Ulysses size
        sp = s.whole(f"{A}.veomni.ulysses_parallel_size", optional=True) or 1
    elif strategy in ("fsdp", "fsdp2"):
        sp = s.whole(f"{A}.ulysses_sequence_parallel_size")
        engine_sp = _int(get(f"{A}.fsdp_config.ulysses_sequence_parallel_size")) or 1
        sp = sp if sp is None or sp > 1 else engine_sp  # FSDPActorConfig.__post_init__ copies a value > 1 over
    else:  # another engine's actor section (torchtitan...) may leave the key out: verl then has no Ulysses split
        sp = s.whole(f"{A}.ulysses_sequence_parallel_size", optional=True) or 1
    for key in (f"{R}.tensor_model_parallel_size",):
        s.whole(key)
    util = get(f"{R}.gpu_memory_utilization")
    if not isinstance(util, (int, float)) or isinstance(util, bool) or not 0 < util <= 1:
        s.problems.append(Problem("range", (f"{R}.gpu_memory_utilization",),
                                  f"{R}.gpu_memory_utilization={util}: must be a fraction in (0, 1]",
                                  fix="0.5 (verl's default) up to 0.9",
                                  source="vLLM's and SGLang's engine arguments refuse it when the rollout starts"))
    out = s.problems
    # A value out of range makes the arithmetic that uses it meaningless, and only that: each rule below runs
    # unless a value it needs failed, and then says it was not checked (a gpu_memory_utilization of 1.5 must not
    # hide the mini batch's errors, nor a mini batch of "abc" hide the KL estimator's).
    bad = {p.keys[0] for p in out}
    ulysses = {f"{A}.megatron.{k}_parallel_size" for k in ("tensor_model", "pipeline_model", "context")} | {
        f"{A}.veomni.ulysses_parallel_size", f"{A}.ulysses_sequence_parallel_size"}

    def blocked(what: str, *needs: str) -> bool:
        failed = [k for k in needs if k in bad]
        if failed:
            out.append(Problem("not-checked", (failed[0],), f"{what}: not checked, since it needs "
                               f"{' and '.join(failed)}, whose value is wrong (said above)", severity="note"))
        return bool(failed)

    grpo_like = get("algorithm.adv_estimator") in ("grpo", "grpo_vectorized", "gdpo", "grpo_passk", "rloo",
                                                    "rloo_vectorized")
    if grpo_like and not blocked("the group rule (rollout.n > 1 for a group baseline)", f"{R}.n") and n == 1:
        estimator = get("algorithm.adv_estimator")
        family = "rloo" if estimator.startswith("rloo") else "grpo"  # GRPO's variants share its group rule
        out.append(Problem("group", (f"{R}.n", "algorithm.adv_estimator"),
                           f"{R}.n=1 with algorithm.adv_estimator={estimator}: each prompt's group is one response, "
                           f"so there is no group baseline to compare it with ({family.upper()} then takes the raw "
                           "reward as the advantage)",
                           fix=f"{R}.n=4 or more (a group for each prompt), or "
                               "algorithm.adv_estimator=reinforce_plus_plus",
                           severity="warning",
                           source=f"verl/trainer/ppo/core_algos.py, compute_{family}_outcome_advantage"))
    out += _kl(get)
    if blocked("the batch and data-parallel rules (mini and micro batches over the data-parallel ranks)",
               *GPUS_KEYS, *sorted(ulysses)):
        return out
    gpus = per_node * nodes
    if gpus % sp:
        if strategy == "megatron":  # verl's words where validate_config has them (fixed micro batches)
            tp, pp, cp = split
            message = (f"n_gpus ({gpus}) must be divisible by model_parallel_size ({tp * pp}) times "
                       f"context_parallel_size ({cp}): TP x PP x CP = {tp} x {pp} x {cp} does not divide the job's "
                       f"{gpus} GPUs")
            keys, source = (f"{A}.megatron.tensor_model_parallel_size",), \
                "verl/utils/config.py, validate_config; megatron-core's initialize_model_parallel"
        else:
            message = f"Ulysses SP = {sp} does not divide the job's {gpus} GPUs"
            engine = "veomni" if strategy == "veomni" else "fsdp"
            keys = (f"{A}.veomni.ulysses_parallel_size" if engine == "veomni" else f"{A}.ulysses_sequence_parallel_size",)
            source = f"verl/workers/engine/{engine}/transformer_impl.py, the Ulysses device mesh"
        out.append(Problem("dp", keys + GPUS_KEYS, message, source=source,
                           fix=f"{what_sp(strategy)} one of {_choices(divisors_near(gpus, sp))}"))
        return out
    dp = gpus // sp
    where = f"{gpus} GPUs" + (f" / {what_sp(strategy)} {sp}" if sp > 1 else "")
    mb_keys = (f"{A}.ppo_mini_batch_size", f"{R}.n")
    if bool(get(f"{R}.log_prob_use_dynamic_bsz")) != dynamic:
        out.append(Problem("dynamic-match", (f"{R}.log_prob_use_dynamic_bsz", f"{A}.use_dynamic_bsz"),
                           f"{R}.log_prob_use_dynamic_bsz must equal {A}.use_dynamic_bsz ({dynamic})",
                           fix=f"{R}.log_prob_use_dynamic_bsz={dynamic} (its default follows the actor's)",
                           source="verl/workers/engine_workers.py, ActorRolloutRefWorker.init_model"))
    if blocked("the mini- and micro-batch rules", "data.train_batch_size", f"{R}.n", f"{A}.ppo_mini_batch_size"):
        if use_critic and not blocked("the critic's mini batch rule", f"{R}.n"):
            out += _critic(get, gpus, n)
        return out
    if mini * n % dp:
        step = dp // math.gcd(n, dp)
        out.append(Problem("mini-dp", mb_keys + GPUS_KEYS,
                           f"the mini batch of {mini} x n {n} = {mini * n} samples does not split over {dp} "
                           f"data-parallel ranks ({where})",
                           fix=f"{A}.ppo_mini_batch_size={_choices(near(mini, lambda v: v % step == 0, hi=train))}",
                           source="verl/workers/engine_workers.py, TrainingWorker.train_mini_batch"))
    if not dynamic and train < mini:  # validate_config says it first; said here with a fix, on the key's line
        out.append(Problem("train-mini", (f"{A}.ppo_mini_batch_size", "data.train_batch_size"),
                           f"train_batch_size ({train}) must be >= actor.ppo_mini_batch_size ({mini})",
                           fix=f"{A}.ppo_mini_batch_size={_choices(divisors_near(train, mini))}",
                           source="verl/workers/config/actor.py, ActorConfig.validate"))
    micro_keys = (f"{A}.ppo_micro_batch_size_per_gpu", f"{R}.log_prob_micro_batch_size_per_gpu",
                  f"{REF}.log_prob_micro_batch_size_per_gpu")
    if not dynamic and not blocked("the micro-batch rules", *micro_keys):
        out += _fixed_batches(get, gpus, dp, train, n, mini, micro, lp_micro, ref_micro, strategy, use_critic,
                              use_reference, where)
    elif dynamic:
        out += _token_budget(get, sp if strategy != "megatron" else 1)
    if use_critic:
        out += _critic(get, gpus, n)
    return out


FIX = re.compile(r"([\w.]+)=(\d+(?: or \d+)*)")  # a rule's fix of one key: KEY=V1 or V2 ...


def _options(fix) -> tuple[str, list[int]] | None:
    m = FIX.fullmatch(fix or "")
    return (m[1], [int(v) for v in m[2].split(" or ")]) if m else None


def _micro(key: str) -> bool:
    return key.endswith("micro_batch_size_per_gpu")


def joint_fixes(found: list[dict], get, rules, most_keys: int = 5, budget: int = 2000) -> list[dict]:
    """The errors' fixes, checked together: each value a rule suggests is tried in the configuration with every
    rule (rules(get) -> Problems), and where it makes a new error, the fixes of that error are tried on top of it,
    nearest first (fewest keys changed, then the smallest relative change). The fixes that pass together replace
    the rules' own; errors no value can fix (the GPU split) are left as they are."""
    fixable = [p for p in found if p["severity"] == "error" and _options(p["fix"])]
    if not fixable:
        return found
    kept = {(p["rule"], tuple(p["keys"])) for p in found if p["severity"] == "error" and p not in fixable}

    def failing(change: dict) -> list:
        errors = rules(lambda k: change[k] if k in change else get(k))
        return [p for p in errors if p.severity == "error" and (p.rule, p.keys) not in kept]

    if len(fixable) == 1:  # one rule's values: keep those that make no new error
        key, values = _options(fixable[0]["fix"])
        passing = [v for v in values if not failing({key: v})]
        if passing:
            fixable[0]["fix"] = f"{key}={_choices(passing)}"
            return found

    def cost(change: dict) -> tuple:
        """A micro batch changes only how a rank's share is cut, not what is trained: batch sizes count first."""
        far = {k: abs(v - (_int(get(k)) or v)) / max(_int(get(k)) or 1, 1) for k, v in change.items()}
        batch = [d for k, d in far.items() if not _micro(k)]
        return len(batch), sum(batch), len(far) - len(batch), sum(far.values()) - sum(batch)

    queue, seen, order, solution = [((0, 0, 0, 0), 0, {})], set(), itertools.count(1), None
    while queue and budget:
        budget -= 1
        change = heapq.heappop(queue)[2]
        errors = failing(change)
        if not errors:
            solution = change
            break
        for key, values in filter(None, (_options(p.fix) for p in errors)):
            for v in values:
                child = {**change, key: v}
                if len(child) <= most_keys and (seen_key := tuple(sorted(child.items()))) not in seen:
                    seen.add(seen_key)
                    heapq.heappush(queue, (cost(child), next(order), child))
    for p in fixable:
        p["fix"] = (" with ".join(f"{k}={solution[k]}" for k in sorted(solution, key=_micro)) + " (these pass every rule together)"
                    if solution else p["fix"] + " (passes this rule; no nearby values pass every rule together)")
    return found


def what_sp(strategy) -> str:
    return "TP x PP x CP" if strategy == "megatron" else "Ulysses SP"


def batch_after_padding(train: int, n: int, dp: int, mini: int, critic_mini: int | None) -> int:
    """The samples of one step as the V1 trainer pads them (PPOTrainer._get_required_batch_multiple)."""
    multiple = math.lcm(dp, mini * n, *( [critic_mini * n] if critic_mini else []))
    return -(-train * n // multiple) * multiple


def _fixed_batches(get, gpus, dp, train, n, mini, micro, lp_micro, ref_micro, strategy, use_critic, use_reference,
                   where) -> list:
    out = []
    real = train * n  # verl/utils/config.py, validate_config
    minimal = dp * (micro or 0) if strategy == "megatron" else gpus
    if minimal and real % minimal:
        step = minimal // math.gcd(n, minimal)
        out.append(Problem("real-train", ("data.train_batch_size", f"{R}.n"),
                           f"real_train_batch_size ({real}) must be divisible by minimal possible batch size "
                           f"({minimal}): data.train_batch_size x n {n} must be a multiple of "
                           + ("the data-parallel size x micro batch" if strategy == "megatron" else "the GPU count"),
                           fix=f"data.train_batch_size={_choices(near(train, lambda v: v % step == 0))}",
                           source="verl/utils/config.py, validate_config"))
    unset = [(f"{A}.ppo_micro_batch_size_per_gpu", micro), (f"{R}.log_prob_micro_batch_size_per_gpu", lp_micro)]
    if use_reference and not get(f"{REF}.log_prob_use_dynamic_bsz"):
        unset.append((f"{REF}.log_prob_micro_batch_size_per_gpu", ref_micro))
    for key, value in unset:
        if value is None:
            legacy = key.replace("_per_gpu", "")
            out.append(Problem("micro-unset", (key,), f"{key} is not set, and without dynamic batching verl 0.9's "
                               "workers read only the per-GPU value" + (f" ({legacy} is no longer used)"
                                                                       if get(legacy) is not None else ""),
                               fix=f"{key}=<a divisor of the per-GPU batch>, or {A}.use_dynamic_bsz=True",
                               source="verl/workers/engine_workers.py, ActorRolloutRefWorker.init_model"))
    if mini * n % dp:  # said above; the per-rank figures below do not exist
        return out
    critic_mini = _int(get(f"{C}.ppo_mini_batch_size")) if use_critic else None
    batch = batch_after_padding(train, n, dp, mini, critic_mini if critic_mini and critic_mini > 0 else None)
    share, per_rank_mini = batch // dp, mini * n // dp
    padded = f", padded to {batch}" if batch != train * n else ""
    if micro and per_rank_mini % micro:
        out.append(Problem("micro", (f"{A}.ppo_micro_batch_size_per_gpu", f"{A}.ppo_mini_batch_size"),
                           f"micro batch {micro} does not divide the per-GPU mini batch {per_rank_mini} "
                           f"({mini} x n {n} / {dp} data-parallel ranks)",
                           fix=f"{A}.ppo_micro_batch_size_per_gpu={_choices(divisors_near(per_rank_mini, micro))}",
                           source="verl/workers/engine/utils.py, prepare_micro_batches"))
    ref_fixed = use_reference and not get(f"{REF}.log_prob_use_dynamic_bsz")
    for key, value, who in ((f"{R}.log_prob_micro_batch_size_per_gpu", lp_micro, "the actor's"),
                            (f"{REF}.log_prob_micro_batch_size_per_gpu", ref_micro if ref_fixed else None,
                             "the reference's")):
        if value and share % value:
            out.append(Problem("log-prob-micro", (key, "data.train_batch_size"),
                               f"log-prob micro batch {value} does not divide {who} per-GPU share {share} "
                               f"({train} x n {n}{padded} / {dp} data-parallel ranks)",
                               fix=f"{key}={_choices(divisors_near(share, value))}",
                               source="verl/workers/engine/utils.py, prepare_micro_batches"))
    return out


def _token_budget(get, sp: int) -> list:
    """Dynamic batching packs sequences up to max_token_len_per_gpu x SP tokens, and a sequence longer than that
    fails (verl/utils/seqlen_balancing.py, rearrange_micro_batches): a warning, since only a sequence that long
    fails."""
    longest = sum(_int(get(k)) or 0 for k in ("data.max_prompt_length", "data.max_response_length"))
    out = []
    for key in (f"{A}.ppo_max_token_len_per_gpu", f"{R}.log_prob_max_token_len_per_gpu"):
        budget = _int(get(key))
        if budget is not None and longest and budget * sp < longest:
            out.append(Problem("token-budget", (key,), f"{key}={budget}: x Ulysses SP {sp} holds fewer tokens "
                               f"than one sequence of data.max_prompt_length + data.max_response_length = {longest}",
                               fix=f"{key}={-(-longest // sp)} or more", severity="warning",
                               source="verl/utils/seqlen_balancing.py, rearrange_micro_batches"))
    return out


def _critic(get, gpus: int, n: int) -> list:
    mini, sp = _int(get(f"{C}.ppo_mini_batch_size")), _int(get(f"{C}.ulysses_sequence_parallel_size")) or 1
    if mini is None or mini < 1 or gpus % sp:
        return []
    dp = gpus // sp
    if mini * n % dp:
        step = dp // math.gcd(n, dp)
        return [Problem("critic-mini-dp", (f"{C}.ppo_mini_batch_size", f"{R}.n"),
                        f"the critic's mini batch of {mini} x n {n} = {mini * n} samples does not split over {dp} "
                        "data-parallel ranks",
                        fix=f"{C}.ppo_mini_batch_size={_choices(near(mini, lambda v: v % step == 0))}",
                        source="verl/workers/engine_workers.py, TrainingWorker.train_mini_batch")]
    return []


KL_KEYS = ((f"{A}.kl_loss_type", f"{A}.use_kl_loss"), ("algorithm.kl_penalty", "algorithm.use_kl_in_reward"))


def _kl(get) -> list:
    """The KL estimators verl's kl_penalty knows; config_check asks verl itself (known_kl) where it can."""
    out = []
    for key, used in KL_KEYS:
        value = get(key)
        if get(used) and isinstance(value, str) and not KNOWN_KL(value):
            close = [k for k in KL_NAMES if KNOWN_KL(k)]
            out.append(Problem("kl", (key,), f"{key}={value}: verl has no such KL estimator; the first update "
                               "raises NotImplementedError", fix=f"one of {', '.join(close)}",
                               source="verl/trainer/ppo/core_algos.py, kl_penalty"))
    return out


# verl 0.9.1's names (kl_penalty_forward), "+" marking the straight-through form of each; KNOWN_KL is replaced by
# config_check with a call of verl's own kl_penalty where verl is importable.
KL_NAMES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "k1+", "k3+", "low_var_kl+")


def KNOWN_KL(name: str) -> bool:  # noqa: N802 - a replaceable hook
    return (name[:-1] if name.endswith("+") else name) in KL_NAMES


def placement(get) -> list[str]:
    """verl 0.9.1's rules for how the job's GPUs split into rollout replicas. verl checks them only when its
    workers start, after Ray is up and the model is loaded; here they fail before the job."""
    per_node, nodes = get("trainer.n_gpus_per_node"), get("trainer.nnodes")
    gpus = per_node * nodes
    job = f"the job's {gpus} GPUs (trainer.n_gpus_per_node={per_node} x trainer.nnodes={nodes})"
    r = "actor_rollout_ref.rollout"
    # data and pipeline parallelism of the rollout: keys an older verl may lack, 1 where absent or null
    tp, dp = get(f"{r}.tensor_model_parallel_size"), get(f"{r}.data_parallel_size") or 1
    replica = tp * dp * (get(f"{r}.pipeline_model_parallel_size") or 1)
    out = []
    if gpus % replica:  # verl/workers/engine_workers.py: "rollout world_size ... is not divisible by infer_world_size"
        out.append(f"{r}.tensor_model_parallel_size={tp}: a rollout replica of TP x DP x PP = {replica} GPUs does not "
                   f"divide {job} (verl/workers/engine_workers.py asserts it when the workers start)")
    elif replica > per_node and replica % per_node:  # verl/workers/rollout/replica.py: a replica spans whole nodes
        out.append(f"{r}.tensor_model_parallel_size={tp}: a rollout replica of {replica} GPUs spans nodes, so it must "
                   f"be a multiple of trainer.n_gpus_per_node={per_node} (verl/workers/rollout/replica.py)")
    # verl/workers/rollout/vllm_rollout/vllm_async_server.py: data parallelism inside a replica splits each node
    if get(f"{r}.name") == "vllm" and dp > 1 and per_node % tp:
        out.append(f"{r}.tensor_model_parallel_size={tp}: with {r}.data_parallel_size={dp} vLLM needs TP to divide "
                   f"trainer.n_gpus_per_node={per_node} (verl/workers/rollout/vllm_rollout/vllm_async_server.py)")
    return out
