"""``na-policy eval``: seeded trials of each policy on the live simulated rig, scored on the rig's ground truth.

One trial: ``na-sim rig --task press_hold --task-seed S --fixture-only`` (the seed's fixture, nobody on the
leader), the estimator (``estimator.launch.xml``) and ``policy.launch.xml`` (follower driver + policy node),
each its own process over DDS. The trial clock starts at the policy's first command (its move to the start
pose included) and runs until success, a slam or ``TRIAL_TIMEOUT``; :func:`na_sim.press_task.score_press`
scores the upward contact force: ``/sim/truth/wrench`` with the seed's object weight added back.

With ``loss_at``, a force policy's estimator is stopped that many seconds into the trial; the trial then
watches ``LOSS_WATCH_S`` more seconds and records what the policy said (``/diagnostics``), whether its
commands stayed fixed and the follower held still, and whether any process died.

A trial during which the follower driver tripped, its bus went silent past the error timeout, the rig fell
behind wall time or the policy stopped because its estimator paused (outside an estimator-loss trial)
(:class:`~na_bringup.live_integrity.IntegrityWatch`, from the first command to the end) is
void: run again, up to ``RERUNS`` more times, and kept with its reason (``void``) when every attempt was void;
void trials never count in the success rates.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from na_bringup.launch_run import stop_processes
from na_bringup.live_integrity import describe
from na_bringup.sim_graph import GraphError, launched, ros_env, sim_rig
from na_policy.features import uses_estimator
from na_policy.live import POLICY_STATUS, LiveError, LiveProbe
from na_sim.press_task import FORCE_BAND, PRESS_TASK, TRIAL_TIMEOUT, contact_from_truth, make_press_episode, score_press

LOSS_WATCH_S = 3.0            # s watched after the estimator is stopped
HOLD_SETTLE_S = 1.3           # s after the stop before the commands must be fixed (the 1 s timeout + in flight)
RERUNS = 2                    # a trial whose graph did not come up or that was void runs at most this often again
TRACE_HZ = 20.0               # force trace kept per trial for the plot


@dataclass
class TrialResult:
    variant: str
    seed: int
    success: bool
    time_to_success: float        # s from the first command; nan when failed
    peak_force: float             # N
    slammed: bool
    longest_hold: float           # s in the band
    commands: int
    command_rate_hz: float        # commands received per second during the trial
    latency_p50_ms: float         # policy node: state callback -> command published
    latency_p99_ms: float
    last_status: str              # the policy's last /diagnostics message
    estimator_loss: dict | None = None
    void: str = ""                # why the trial does not count (a trip, a silent bus, the rig behind); "" = valid
    trace: list[list[float]] = field(default_factory=list)   # (t, force) at TRACE_HZ

    def as_dict(self) -> dict:
        return asdict(self)


def _value(values: dict[str, str], key: str) -> float:
    try:
        return float(values[key])
    except (KeyError, ValueError):
        return float("nan")


def run_trial(probe: LiveProbe, model: Path, variant: str, policy: Path, seed: int, out: Path,
              loss_at: float | None = None) -> TrialResult:
    log_dir = out / "logs" / f"{variant}_seed{seed}"
    sim_dir = out / "sim"
    payload = make_press_episode(seed).payload_kg
    loss = loss_at is not None and uses_estimator(variant)
    # Before the launch: the trial clock starts at the policy's first command. The policy stopping on an
    # estimator that paused past its timeout voids a trial, unless the trial takes the estimator away itself.
    probe.reset(arms=("follower",), voiding=() if loss else (POLICY_STATUS,))
    with sim_rig(sim_dir, log_dir, task=PRESS_TASK, options=f"--task-seed {seed} --fixture-only") as (rig, _, _), \
            launched("estimator.launch.xml", {"model": str(model)}, log_dir, env=ros_env()) as estimator, \
            launched("policy.launch.xml", {"policy": str(policy), "start_estimator": "false", "sim": "true",
                                           "sim_dir": str(sim_dir)}, log_dir, env=ros_env()) as graph:
        graphs: tuple = (rig, estimator, graph)
        probe.spin_until(lambda: len(probe.data.command_time) > 0, 90.0, "the policy's first command", graphs,
                         str(log_dir))
        start, window = probe.data.command_time[0], probe.now()
        stopped_at = None
        while True:
            probe.spin_for(0.2, graphs)
            now = time.monotonic() - start
            if loss and stopped_at is None and now >= loss_at:
                stop_processes(estimator.processes)
                graphs, stopped_at = (rig, graph), time.monotonic()
            times, truth = probe.truth_since(start)
            forces = contact_from_truth(truth, payload)
            score = score_press(times, forces)
            if stopped_at is not None:
                if time.monotonic() - stopped_at >= LOSS_WATCH_S:
                    break
            elif now > TRIAL_TIMEOUT or (not loss and (score.success or score.slammed)):
                break
        for g in graphs:
            g.check_alive()                # nothing may have died
        probe.settle_diagnostics(graphs)
        faults = probe.watch.faults_since(window)
        loss_report = _loss_report(probe, stopped_at) if stopped_at is not None else None
    data = probe.data
    during = np.asarray(data.command_time)
    span = during[-1] - during[0] if during.size > 1 else float("nan")
    keep = np.arange(0, times.size, max(1, round(100.0 / TRACE_HZ)))
    values = data.policy_values
    return TrialResult(variant=variant, seed=seed, success=score.success, time_to_success=score.time_to_success,
                       peak_force=score.peak_force, slammed=score.slammed, longest_hold=score.longest_hold,
                       commands=int(during.size),
                       command_rate_hz=(during.size - 1) / span if span > 0 else float("nan"),
                       latency_p50_ms=_value(values, "latency_p50_ms"),
                       latency_p99_ms=_value(values, "latency_p99_ms"),
                       last_status=data.policy_status[-1][2] if data.policy_status else "",
                       estimator_loss=loss_report, void=describe(faults) if faults else "",
                       trace=[[round(float(times[k]), 3), round(float(forces[k]), 3)] for k in keep])


def _loss_report(probe: LiveProbe, stopped_at: float) -> dict:
    """What happened after the estimator was stopped at ``stopped_at`` (monotonic)."""
    data = probe.data
    said = [message for t, _level, message in data.policy_status if t >= stopped_at]
    levels = [level for t, level, _message in data.policy_status if t >= stopped_at]
    times = np.asarray(data.command_time)
    commands = np.asarray(data.command)
    held = commands[times >= stopped_at + HOLD_SETTLE_S]
    command_change = float(np.max(np.abs(held - held[0]))) if len(held) else float("nan")
    # The follower's measured pose over the same window (state stamps are ROS time, so align by count instead:
    # the states received after the stop are the last ones).
    positions = np.asarray(data.state_position)
    tail = positions[-max(1, int(LOSS_WATCH_S * 100 * 0.6)):] if len(positions) else positions
    drift = float(np.max(np.ptp(tail[:, :4], axis=0))) if len(tail) else float("nan")
    return {"policy_said": said[-1] if said else "", "policy_level": max(levels) if levels else -1,
            "commands_after_stop": len(held), "command_change_rad": command_change,
            "follower_drift_rad": drift}


def evaluate(model: Path, policies: dict[str, Path], seeds: list[int], out: Path, *, loss_at: float | None = None,
             log: Callable[[str], None] = print, voided: list[dict] | None = None) -> list[TrialResult]:
    """Every (policy, seed) trial; ``voided`` collects each void attempt (variant, seed, attempt, reason)."""
    results: list[TrialResult] = []
    voided = [] if voided is None else voided
    probe = LiveProbe()
    began = time.monotonic()
    total = len(policies) * len(seeds)
    try:
        for variant, path in policies.items():
            for seed in seeds:
                for attempt in range(RERUNS + 1):
                    try:
                        result = run_trial(probe, model, variant, path, seed, out, loss_at)
                    except (GraphError, LiveError) as exc:       # the graph did not come up (a stalled host)
                        if attempt == RERUNS:
                            raise
                        log(f"{variant} seed {seed}: {exc}; running the trial again")
                        continue
                    if not result.void:
                        break
                    voided.append({"variant": variant, "seed": seed, "attempt": attempt + 1, "reason": result.void})
                    log(f"{variant} seed {seed}: VOID ({result.void})"
                        + ("; running the trial again" if attempt < RERUNS else "; no valid attempt left"))
                results.append(result)
                outcome = "VOID" if result.void else \
                    ("success" if result.success else ("slam" if result.slammed else "fail"))
                extra = ""
                if result.estimator_loss is not None:
                    report = result.estimator_loss
                    extra = (f"; estimator stopped: policy said '{report['policy_said']}', command change "
                             f"{report['command_change_rad']:.4f} rad, "
                             f"follower drift {report['follower_drift_rad']:.4f} rad")
                log(f"[eval {len(results)}/{total} {time.monotonic() - began:5.0f}s] {variant} seed {seed}: {outcome}, "
                    f"peak {result.peak_force:.1f} N, in band {result.longest_hold:.1f} s, "
                    f"{result.command_rate_hz:.1f} commands/s{extra}")
    finally:
        probe.close()
    return results


def table_lines(results: list[TrialResult]) -> list[str]:
    """The paper-style behaviour-cloning table: one row per policy."""
    lines = [f"press_hold: hold {FORCE_BAND[0]:g}-{FORCE_BAND[1]:g} N on a fixture of unknown height "
             f"(ground truth of the simulated rig; void trials left out)",
             f"{'policy':<22} {'trials':>6} {'success':>8} {'peak force (N)':>15} {'time (s)':>9} {'slams':>6} "
             f"{'rate (Hz)':>9} {'p99 latency (ms)':>17}"]
    for variant in dict.fromkeys(r.variant for r in results):
        rows = [r for r in results if r.variant == variant and not r.void]
        if not rows:
            continue
        success = np.mean([r.success for r in rows]) * 100
        peak = np.mean([r.peak_force for r in rows])
        done = [r.time_to_success for r in rows if r.success]
        elapsed = f"{np.mean(done):.1f}" if done else "-"
        rate = np.nanmean([r.command_rate_hz for r in rows])
        p99 = np.nanmax([r.latency_p99_ms for r in rows]) if any(np.isfinite(r.latency_p99_ms) for r in rows) \
            else float("nan")
        name = {"proprio": "BC, proprioception", "force": "BC, + estimator force"}.get(variant, variant)
        lines.append(f"{name:<22} {len(rows):>6} {success:>7.0f}% {peak:>15.1f} {elapsed:>9} "
                     f"{sum(r.slammed for r in rows):>6} {rate:>9.1f} {p99:>17.2f}")
    return lines


def plot_results(results: list[TrialResult], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = list(dict.fromkeys(r.variant for r in results))
    fig, axes = plt.subplots(1, len(variants) + 1, figsize=(5 * (len(variants) + 1), 4))
    colors = {"proprio": "tab:orange", "force": "tab:blue"}
    for axis, variant in zip(axes[:-1], variants, strict=True):
        for r in (r for r in results if r.variant == variant):
            trace = np.asarray(r.trace) if r.trace else np.zeros((0, 2))
            if len(trace):
                axis.plot(trace[:, 0], trace[:, 1], color=colors.get(variant, "gray"), alpha=0.8 if r.success else 0.3,
                          lw=1.2 if r.success else 0.8)
        axis.axhspan(*FORCE_BAND, color="green", alpha=0.15, label="target band")
        rate = np.mean([r.success for r in results if r.variant == variant]) * 100
        axis.set_title(f"{variant}: {rate:.0f} % success")
        axis.set_xlabel("time from the first command (s)")
        axis.set_ylabel("true contact force (N)")
        axis.legend(loc="upper left")
    bars = axes[-1]
    rates = [np.mean([r.success for r in results if r.variant == v]) * 100 for v in variants]
    bars.bar(variants, rates, color=[colors.get(v, "gray") for v in variants])
    bars.set_ylim(0, 100)
    bars.set_ylabel("success rate (%)")
    bars.set_title(f"{len(results) // max(1, len(variants))} seeded trials per policy")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
