"""Data-parallel training (``na_training.parallel``): 2 devices and 2 processes follow the single-device run
with the same global batch, a checkpoint written on 2 devices restores on 1, and bad scaling input gets a
one-line error.

The device count and ``jax.distributed`` are fixed when JAX starts, so the runs are separate processes
(``scaling_worker.py``), all started at once; the reference is the plain single-device trainer (no mesh).
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

WORKER = Path(__file__).with_name("scaling_worker.py")
TWO_HOST_DEVICES = "--xla_force_host_platform_device_count=2"
# Sharded reductions add in another order: float32 parameters after the 3 warm-up steps (which move them by up
# to ~6e-4) agree to ~1e-6, the EMA to ~1e-8 (measured); the tolerances leave a margin of 10x.
LOSS_RTOL = 1e-6
PARAM_ATOL = 1e-5
EMA_ATOL = 1e-6


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def environment(devices: int = 1) -> dict[str, str]:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + (f" {TWO_HOST_DEVICES}" if devices == 2 else "")).strip()
    return env


@pytest.fixture(scope="module")
def scaling_runs(tmp_path_factory):
    """single (reference), mesh (2 host devices) and process (2 processes x 1 device) runs, concurrently."""
    out = tmp_path_factory.mktemp("scaling")
    port = free_port()
    base = [sys.executable, str(WORKER)]
    commands = [([*base, "single", str(out)], environment(1)), ([*base, "mesh", str(out)], environment(2))]
    commands += [([*base, "process", str(out), "--recipes", "hybrid", "--coordinator", f"127.0.0.1:{port}",
                   "--num-processes", "2", "--process-id", str(i)], environment(1)) for i in (0, 1)]
    running = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for command, env in commands]
    failures = []
    for process, (command, _) in zip(running, commands, strict=True):
        output, _ = process.communicate(timeout=840)
        if process.returncode != 0:
            failures.append(f"{' '.join(command[2:4])} exited {process.returncode}:\n{output[-3000:]}")
    assert not failures, "\n".join(failures)
    return out, {mode: dict(np.load(out / f"{mode}.npz")) for mode in ("single", "mesh", "process")}


def assert_same_training(reference: dict, run: dict, recipe: str) -> None:
    np.testing.assert_allclose(run[f"{recipe}_losses"], reference[f"{recipe}_losses"], rtol=LOSS_RTOL)
    assert len(reference[f"{recipe}_losses"]) == 3
    moved = np.abs(reference[f"{recipe}_params"] - reference[f"{recipe}_initial"]).max()
    assert moved > 20 * PARAM_ATOL             # the comparison below would notice a missing or extra step
    np.testing.assert_allclose(run[f"{recipe}_params"], reference[f"{recipe}_params"], rtol=0, atol=PARAM_ATOL)
    np.testing.assert_allclose(run[f"{recipe}_ema"], reference[f"{recipe}_ema"], rtol=0, atol=EMA_ATOL)
    assert run[f"{recipe}_params_replicated"]
    assert int(run[f"{recipe}_batch_devices"]) == 2


@pytest.mark.slow    # MJX compiles per sharding (~1-4 min on 2 busy cores; seconds with a warm XLA cache)
@pytest.mark.parametrize("recipe", ["rollout", "hybrid"])
def test_two_devices_train_like_one_device_with_the_same_global_batch(scaling_runs, recipe):
    _, runs = scaling_runs
    assert_same_training(runs["single"], runs["mesh"], recipe)
    assert int(runs["mesh"][f"{recipe}_batch_rows_here"]) == 2          # one process holds both halves


@pytest.mark.slow
def test_two_processes_train_like_one_process_with_the_same_global_batch(scaling_runs):
    _, runs = scaling_runs
    assert_same_training(runs["single"], runs["process"], "hybrid")
    assert int(runs["process"]["hybrid_batch_rows_here"]) == 1         # each process built only its row


@pytest.mark.slow
@pytest.mark.parametrize("run", ["mesh-rollout", "process-hybrid"])
def test_a_checkpoint_written_in_parallel_restores_on_one_device(scaling_runs, run):
    import jax

    from na_training.parallel import DataParallel
    from na_training.synthetic import synthetic_episode
    from na_training.train import Trainer, load_trained_model

    out, runs = scaling_runs
    mode, recipe = run.split("-")
    expected = runs[mode][f"{recipe}_params"]
    flat = lambda tree: np.concatenate([np.asarray(x, np.float64).ravel() for x in jax.tree.leaves(tree)])  # noqa: E731
    model, description = load_trained_model(out / f"run-{run}", use_ema=False)
    from flax import nnx

    assert description["checkpoint_step"] == 3
    np.testing.assert_array_equal(flat(nnx.state(model, nnx.Param)), expected)
    # and into a trainer laid out over one device (a mesh of another size than the writer's)
    from na_training.config import config_from_dict

    config = config_from_dict(description["config"])
    trainer = Trainer(config, [synthetic_episode(60, seed=0)], run_dir=out / f"run-{run}",
                      parallel=DataParallel(jax.devices()[:1]))
    try:
        assert trainer.restore() and trainer.state.step == 3
        np.testing.assert_array_equal(flat(trainer.state.params), expected)
        assert all(len(leaf.sharding.device_set) == 1 for leaf in jax.tree.leaves(trainer.state.params))
    finally:
        trainer.close()


def test_a_process_share_of_a_batch_is_those_rows_of_the_whole_batch(tiny_config, synthetic_episodes):
    from dataclasses import replace

    from na_training.config import HybridConfig
    from na_training.train import Trainer

    config = replace(tiny_config, recipe="hybrid", batch_size=4,
                     hybrid=HybridConfig(batch_size=6, augment_temperature=2.0, augment_voltage=0.3))
    trainer = Trainer(config, synthetic_episodes[:2])
    for step in (0, 7):
        whole, share = trainer.train_batch(step), trainer.train_batch(step, slice(2, 4))
        assert set(share) == set(whole)
        for key in whole:
            np.testing.assert_array_equal(share[key], whole[key][2:4])
        whole, share = trainer.supervised_batch(step), trainer.supervised_batch(step, slice(3, 6))
        for key in whole:
            np.testing.assert_array_equal(share[key], whole[key][3:6])
    assert not np.array_equal(trainer.train_batch(0)["qpos0"][:2], trainer.train_batch(0)["qpos0"][2:])


def run_cli(args: list[str], devices: int = 1, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "na_training.cli", *args], env=environment(devices),
                          capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(result: subprocess.CompletedProcess, *words: str) -> str:
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_more_devices_than_visible_is_a_one_line_error(tmp_path):
    result = run_cli(["fit", "--devices", "3", "--synthetic", "2", "--out", str(tmp_path / "run")], devices=2)
    assert_one_line_error(result, "--devices 3", "only 2")


def test_a_batch_the_devices_cannot_split_is_a_one_line_error(tmp_path):
    config = tmp_path / "odd.yaml"
    config.write_text("model: {d_model: 16, num_heads: 2, d_ff: 32, num_blocks: 1, head_hidden: 16}\n"
                      "batch_size: 3\ncurriculum: [[0, 8]]\n")
    result = run_cli(["fit", "--config", str(config), "--synthetic", "2", "--synthetic-frames", "60",
                      "--out", str(tmp_path / "run")], devices=2)
    assert_one_line_error(result, "batch_size 3", "2 devices")
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_coordinator_that_never_answers_is_a_one_line_error_after_the_timeout(tmp_path):
    port = free_port()                           # nothing listens there
    result = run_cli(["fit", "--synthetic", "2", "--out", str(tmp_path / "run"), "--coordinator",
                      f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", "1", "--init-timeout", "2"])
    assert_one_line_error(result, f"127.0.0.1:{port}", "did not answer within 2 s")


@pytest.mark.slow
def test_a_checkpoint_of_another_model_config_is_a_one_line_error(scaling_runs, tmp_path):
    import shutil

    out, _ = scaling_runs
    run = tmp_path / "run"
    shutil.copytree(out / "run-mesh-rollout" / "checkpoints", run / "checkpoints")    # no run.json to warn first
    config = tmp_path / "wider.yaml"
    config.write_text("model: {d_model: 32, num_heads: 2, d_ff: 32, num_blocks: 1, head_hidden: 16}\n"
                      "batch_size: 2\ncurriculum: [[0, 8]]\n")
    result = run_cli(["fit", "--config", str(config), "--synthetic", "2", "--synthetic-frames", "60",
                      "--out", str(run)])
    assert_one_line_error(result, "checkpoint 3 cannot be restored", "another model config")
