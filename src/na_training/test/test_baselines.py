"""Force baselines on synthetic MuJoCo episodes where their assumptions hold, contact tuning and metrics.

Generator (na_training.synthetic): the na_description model itself with contacts and the constraint
solver off, one semi-implicit Euler step per recorded frame (4.25 ms, implicit damping off), motor torque
Kt·i + b, a known tool force applied with xfrc_applied at the tool point. With the forward
velocity difference the ID baselines are then exact up to float error (tolerance 2 mN on forces of
about 2.7 N); with the default central difference and the momentum observer the discretisation
error remains (tolerance 50 mN).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from na_description.friction import backlash_flank
from na_description.model import Kinematics
from na_training.baselines.contact import ContactDetector, tune_contact_threshold
from na_training.baselines.dynamics import (
    InverseDynamicsCache,
    RigidBodyModel,
    finite_difference_acceleration,
    force_from_joint_residual,
)
from na_training.baselines.id_friction import IDFriction
from na_training.baselines.id_linear import DEFAULT_MIN_SLOPE, IDLinear
from na_training.baselines.metrics import (
    balanced_accuracy,
    classification_metrics,
    false_contact_rate,
    force_mae,
    force_mae_by_group,
    roc_auc,
)
from na_training.baselines.momentum_observer import DEFAULT_GAIN, MomentumObserver, observer_residual
from na_training.episode import Episode
from na_training.synthetic import SyntheticActuator, force_pulse, synthetic_episode

SLOPE = np.array([1.70, 1.80, 1.60, 1.90])       # N·m/A, near the XM430's 4.1 N·m / 2.3 A
OFFSET = np.array([0.02, -0.03, 0.01, 0.0])      # N·m
PUSH = np.array([1.5, -1.0, -2.0])               # N, environment on robot, base frame
EXACT_TOL = 2e-3                                 # N
DISCRETE_TOL = 5e-2                              # N
STEP = 0.00425                                   # s: one MuJoCo step of the arm model per frame

LINEAR = SyntheticActuator(slope=SLOPE, offset=OFFSET)
FRICTION = SyntheticActuator(
    slope=SLOPE, offset=OFFSET, coulomb=np.array([0.05, 0.08, 0.06, 0.04]),
    stribeck=np.array([0.09, 0.12, 0.10, 0.06]), viscous=np.array([0.05, 0.08, 0.06, 0.03]),
    stribeck_velocity=np.array([0.10, 0.15, 0.08, 0.20]), backlash=np.array([0.02, -0.03, 0.025, 0.01]))


def simulate(actuator: SyntheticActuator, seed: int, episode_id: str, task: str = "free",
             push: np.ndarray | None = None, start: float = 1.0, stop: float = 3.0, **options) -> Episode:
    """4 s of the arm, one plain Euler step per frame, pushed at the tool with ``push`` from ``start`` to ``stop``."""
    frames = round(4.0 / STEP)
    force = None if push is None else force_pulse(frames, STEP, push, start, stop)
    return synthetic_episode(frames, seed, actuator=actuator, tool_force=force, frame_period=STEP,
                             implicit_damping=False, episode_id=episode_id, task=task, **options)


def _episodes(actuator: SyntheticActuator) -> tuple[list[Episode], list[Episode]]:
    free = [simulate(actuator, s, f"free{s}") for s in range(3)]
    contact = [simulate(actuator, 10 + s, f"push{s}", "push", PUSH * (1 + 0.3 * s)) for s in range(2)]
    return free, contact


@pytest.fixture(scope="module")
def linear_data():
    return _episodes(LINEAR)


@pytest.fixture(scope="module")
def friction_data():
    return _episodes(FRICTION)


def _mae(method, episodes) -> float:
    return max(force_mae(method.estimate(e), e.force) for e in episodes)


def test_id_linear_recovers_current_map_and_force(linear_data):
    free, contact = linear_data
    exact = IDLinear(InverseDynamicsCache(accel_scheme="forward", smoothing_frames=1))
    report = exact.fit(free)
    np.testing.assert_allclose(report["slope"], SLOPE, rtol=1e-3)
    np.testing.assert_allclose(report["offset"], OFFSET, atol=1e-3)
    assert report["clamped_joints"] == []
    assert _mae(exact, contact) < EXACT_TOL
    # with force on, the estimate is the applied push, not zero: sign and size are right
    push = contact[0]
    middle = push.time.size // 2
    np.testing.assert_allclose(exact.estimate(push)[middle], push.force[middle], atol=EXACT_TOL)
    default = IDLinear()                           # central difference, 5-frame smoothing
    default.fit(free)
    assert _mae(default, contact) < DISCRETE_TOL
    assert np.mean(np.abs(default.estimate(free[0]))) < DISCRETE_TOL   # no force in free motion


def test_id_linear_clamps_negative_slope_and_reports_it(linear_data):
    free, _ = linear_data
    # joint4's current wired with the wrong sign: its fitted slope becomes negative
    inverted = [replace(e, columns={**e.columns, "current_joint4": -e.columns["current_joint4"]}) for e in free]
    method = IDLinear(InverseDynamicsCache(accel_scheme="forward", smoothing_frames=1))
    report = method.fit(inverted)
    assert report["slope_raw"][3] == pytest.approx(-SLOPE[3], rel=1e-3)
    assert report["slope"][3] == DEFAULT_MIN_SLOPE
    assert report["clamped_joints"] == ["joint4"]
    assert "clamped" in report["notes"][3] and "clamped" not in report["notes"][0]


def test_id_friction_recovers_friction_model_where_linear_fails(friction_data):
    free, contact = friction_data
    cache = InverseDynamicsCache(accel_scheme="forward", smoothing_frames=1)
    friction = IDFriction(cache)
    report = friction.fit(free)
    np.testing.assert_allclose(report["slope"], SLOPE, rtol=1e-3)
    np.testing.assert_allclose(report["coulomb"], FRICTION.coulomb, atol=3e-3)
    np.testing.assert_allclose(report["stribeck"], FRICTION.stribeck, atol=3e-3)
    np.testing.assert_allclose(report["stribeck_velocity"], FRICTION.stribeck_velocity, rtol=0.05)
    np.testing.assert_allclose(report["viscous"], FRICTION.viscous, atol=3e-3)
    np.testing.assert_allclose(report["backlash"], FRICTION.backlash, atol=3e-3)
    assert _mae(friction, contact) < EXACT_TOL
    linear = IDLinear(cache)
    linear.fit(free)
    assert _mae(linear, contact) > 20 * EXACT_TOL   # the friction the linear map ignores shows as force


def test_momentum_observer_recovers_force_with_tuned_gain(linear_data):
    free, contact = linear_data
    observer = MomentumObserver()
    report = observer.fit(free + contact[:1])
    assert report["gain"] in observer.gain_grid and "line search" in report["gain_source"]
    assert report["gain"] > 10.0   # noise-free data: a fast observer wins the line search
    assert _mae(observer, contact[1:]) < DISCRETE_TOL
    untuned = MomentumObserver()
    assert untuned.fit(free)["gain"] == DEFAULT_GAIN


def test_momentum_observer_lags_like_a_first_order_filter():
    """A force step is tracked as 1 − exp(−K_O t) in the joint residual (the observer's definition)."""
    n, h, gain = 200, 0.01, 20.0
    time = np.arange(n) * h
    momentum = np.zeros((n, 4))
    momentum[100:] = np.linspace(0, 1.0, 100)[:, None]      # ramp of p with no model torque -> τ_ext = 1/h·Δp
    residual = observer_residual(momentum, np.zeros((n, 4)), np.zeros((n, 4)), time, gain)
    rate = 1.0 / (99 * h)
    expected = rate * (1 - np.exp(-gain * (time[150] - time[100])))
    assert residual[150, 0] == pytest.approx(expected, rel=1e-9)
    assert np.all(residual[:101] == 0.0)                      # nothing before the momentum changes
    uneven = time.copy()
    uneven[-1] += 1e-6                                        # forces the per-frame recursion path
    np.testing.assert_allclose(observer_residual(momentum, np.zeros((n, 4)), np.zeros((n, 4)), uneven, gain)[:-1],
                               residual[:-1], atol=1e-10)


def test_force_from_joint_residual_inverts_jacobian_transpose():
    kinematics = Kinematics()
    rng = np.random.default_rng(3)
    q = rng.uniform(-0.8, 0.8, (5, 4))
    jac = np.stack([kinematics.tool_jacobian(qk) for qk in q])
    force = rng.normal(size=(5, 3))
    tau = np.einsum("tji,tj->ti", jac, force)              # τ_ext = Jvᵀ f
    np.testing.assert_allclose(force_from_joint_residual(tau, jac), force, atol=1e-9)
    _, jac_id = RigidBodyModel().inverse_dynamics(q, np.zeros_like(q), np.zeros_like(q))
    np.testing.assert_allclose(jac_id, jac, atol=1e-12)


def test_finite_difference_schemes():
    time = np.linspace(0.0, 1.0, 11)
    velocity = (time ** 2)[:, None]
    central = finite_difference_acceleration(velocity, time, "central")
    np.testing.assert_allclose(central[1:-1, 0], 2 * time[1:-1], atol=1e-12)
    backward = finite_difference_acceleration(velocity, time, "backward")
    np.testing.assert_allclose(backward[1:, 0], time[1:] + time[:-1], atol=1e-12)   # lags half a frame
    with pytest.raises(ValueError, match="scheme"):
        finite_difference_acceleration(velocity, time, "spline")
    with pytest.raises(ValueError, match="odd"):
        finite_difference_acceleration(velocity, time, "central", smoothing_frames=4)


def test_backlash_flank_holds_last_direction():
    velocity = np.array([0.0, 0.2, 0.01, -0.01, -0.3, 0.0])[:, None]
    np.testing.assert_array_equal(backlash_flank(velocity, 0.05)[:, 0], [0, 1, 1, 1, -1, -1])


def test_episodes_the_observers_cannot_use_are_named(linear_data):
    episode = linear_data[0][0]
    assert episode.unusable_reason() is None
    backwards = replace(episode, columns={**episode.columns, "time": episode.time[::-1].copy()})
    assert "increasing" in backwards.unusable_reason()
    short = replace(episode, columns={name: values[:2] for name, values in episode.columns.items()})
    assert "at least 3 frames" in short.unusable_reason()
    silent = replace(episode, columns={**episode.columns, "velocity_joint2": np.full(len(episode), np.nan)})
    assert silent.unusable_reason() == "velocity has a joint without any finite sample"
    with pytest.raises(RuntimeError, match="fit"):
        IDLinear().estimate(episode)


def test_contact_threshold_tuning_and_detection(linear_data):
    tuned = tune_contact_threshold(np.array([0.1, 0.2, 0.3, 1.0, 1.2]), np.array([0, 0, 0, 1, 1], bool))
    assert 0.3 < tuned["threshold"] < 1.0 and tuned["balanced_accuracy"] == 1.0
    single = tune_contact_threshold(np.linspace(0, 1, 101), np.zeros(101, bool))
    assert single["threshold"] == pytest.approx(0.99) and "quantile" in single["rule"]
    free, contact = linear_data
    observer = MomentumObserver(gain=50.0)
    observer.fit(free)
    detector = ContactDetector()
    detector.fit([observer.estimate(e) for e in free + contact], [e.contact for e in free + contact])
    predicted = detector.predict(observer.estimate(contact[1]))
    assert balanced_accuracy(contact[1].contact, predicted) > 0.95
    assert false_contact_rate([detector.predict(observer.estimate(e)) for e in free]) < 0.02


def test_metrics_on_hand_checkable_inputs():
    predicted = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 3.0], [9.0, 9.0, 9.0]])
    label = np.zeros((3, 3))
    assert force_mae(predicted, label, np.array([True, True, False])) == pytest.approx(4.0 / 6.0)
    assert np.isnan(force_mae(predicted, label, np.zeros(3, bool)))
    groups = force_mae_by_group(["a/200g", "a/200g", "b/300g"], [predicted[:1], predicted[1:2], predicted[2:]],
                                [label[:1], label[1:2], label[2:]], [np.ones(1, bool)] * 3)
    assert groups["a/200g"] == pytest.approx(4.0 / 6.0) and groups["b/300g"] == 9.0
    assert groups["avg"] == pytest.approx((4.0 / 6.0 + 9.0) / 2)
    assert false_contact_rate([np.array([0, 1, 0, 0]), np.array([1, 1])]) == pytest.approx(0.5)
    positive = np.array([1, 1, 0, 0, 0], bool)
    predicted_class = np.array([1, 0, 1, 0, 0], bool)
    m = classification_metrics(positive, predicted_class, score=np.array([0.9, 0.4, 0.6, 0.1, 0.4]))
    assert m["accuracy"] == pytest.approx(0.6) and m["precision"] == 0.5 and m["recall"] == 0.5
    # pairs (pos, neg): 0.9 beats all 3; 0.4 beats 0.1, ties 0.4 (half), loses to 0.6 -> (3 + 1.5) / 6
    assert m["auc"] == pytest.approx(4.5 / 6)
    assert roc_auc(np.array([0, 1], bool), np.array([0.2, 0.8])) == 1.0
    assert np.isnan(roc_auc(np.ones(3, bool), np.arange(3.0)))
    none_predicted = classification_metrics(positive, np.zeros(5, bool))
    assert none_predicted["precision"] == 0.0 and none_predicted["recall"] == 0.0
    assert balanced_accuracy(positive, predicted_class) == pytest.approx((0.5 + 2 / 3) / 2)


# ------------------------------------------------------------------------------------ comparison

def test_run_comparison_end_to_end_on_a_nad(tmp_path, linear_data, write_nad):
    import json

    from na_training.baselines.compare import run_comparison

    free, contact = linear_data
    extra_push = simulate(LINEAR, 30, "push2", "push", -PUSH, 0.8, 2.5)
    restricted = [simulate(LINEAR, 40 + s, f"band{s}", restriction_stiffness=0.6) for s in range(3)]
    # split seed 1: each instance's test episode is known
    nad = write_nad(tmp_path / "nad", [*free, *contact, extra_push, *restricted], split_seed=1)
    results = run_comparison(nad, None, tmp_path / "out")
    assert results["episodes"] == {"train": 3, "test": 3, "force_test": 2, "no_contact_test": 1}
    for method in ("ID-Linear", "ID-Friction", "GMO"):
        assert results["force_mae"][method]["push/0g"] < DISCRETE_TOL, method
        assert results["false_contact_rate"][method] < 0.05, method
    assert set(results["condition"]) == {"Threshold", "SVM (RBF)", "Random Forest"}
    assert all(m["samples"] > 0 for m in results["condition"].values())
    written = json.loads((tmp_path / "out" / "comparison.json").read_text())
    assert written["force_mae"]["GMO"]["avg"] == pytest.approx(results["force_mae"]["GMO"]["avg"])
    markdown = (tmp_path / "out" / "comparison.md").read_text()
    assert "| ID-Friction |" in markdown and "Random Forest" in markdown


def test_compare_scores_a_learned_predictor_with_the_same_metrics(linear_data):
    from na_training.baselines.compare import LEARNED, compare_episodes

    free, contact = linear_data

    def offset_predictor(episode: Episode) -> dict[str, np.ndarray]:
        # a stand-in learned model: the label plus 0.1 N on x, contact from the label, always nominal
        force = episode.force + np.array([0.1, 0.0, 0.0])
        return {"force": force, "contact_prob": episode.contact.astype(float),
                "condition": np.ones((len(episode), 5))}

    results = compare_episodes(free[:2] + contact[:1], free[2:] + contact[1:], offset_predictor)
    assert results["force_mae"][LEARNED]["avg"] == pytest.approx(0.1 / 3)
    assert results["false_contact_rate"][LEARNED] == 0.0
    ratio = results["best_classical_to_learned_force_mae"]
    best = min(v["avg"] for k, v in results["force_mae"].items() if k != LEARNED)
    assert ratio == pytest.approx(best / (0.1 / 3))
    # one condition only: the baselines cannot be trained, and the report says so
    assert set(results["condition"]) == {LEARNED} and results["condition"][LEARNED]["accuracy"] == 1.0
    assert any("condition baselines skipped" in note for note in results["notes"])


def contract_metadata(n_features: int, history: int, names: list[str] | None = None) -> dict[str, str]:
    """The metadata the estimator's contract requires, for a model of this arm's features."""
    import json

    from na_description import load_spec
    from na_description.features import SCHEMA_VERSION, feature_names

    spec = load_spec()
    names = feature_names(spec) if names is None else names
    assert len(names) == n_features
    return {"schema_version": SCHEMA_VERSION, "feature_names": json.dumps(names),
            "feature_mean": json.dumps([0.0] * n_features), "history_length": str(history),
            "joint_names": json.dumps(spec.joint_names), "effort_bounds": json.dumps(spec.effort_bounds.tolist())}


def _constant_onnx_model(path, n_features: int, history: int = 9, names: list[str] | None = None) -> None:
    """A real ONNX graph with the model contract's outputs: zero force, contact ≈ 0, condition ≈ 1 (nominal)."""
    import onnx
    from onnx import TensorProto, helper

    def const(name, value):
        value = np.asarray(value, dtype=np.float32)
        return helper.make_tensor(name, TensorProto.FLOAT, value.shape, value.ravel())

    last = helper.make_node("Gather", ["features", "last_index"], ["last"], axis=1)
    nodes = [last]
    outputs = []
    for name, width, bias in (("force", 3, None), ("contact_prob", 1, -5.0), ("condition", 5, 5.0)):
        logits = f"{name}_logits"
        nodes.append(helper.make_node("MatMul", ["last", f"{name}_w"], [logits if bias is not None else name]))
        if bias is not None:
            nodes.append(helper.make_node("Add", [logits, f"{name}_b"], [f"{name}_pre"]))
            nodes.append(helper.make_node("Sigmoid", [f"{name}_pre"], [name]))
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", width]))
    initializers = [helper.make_tensor("last_index", TensorProto.INT64, [], [history - 1])]
    for name, width, bias in (("force", 3, None), ("contact_prob", 1, -5.0), ("condition", 5, 5.0)):
        initializers.append(const(f"{name}_w", np.zeros((n_features, width))))
        if bias is not None:
            initializers.append(const(f"{name}_b", np.full(width, bias)))
    graph = helper.make_graph(nodes, "constant", [helper.make_tensor_value_info(
        "features", TensorProto.FLOAT, ["batch", history, n_features])], outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    helper.set_model_props(model, contract_metadata(n_features, history, names))
    onnx.checker.check_model(model)
    onnx.save(model, path)


def test_run_comparison_runs_an_onnx_model(tmp_path, linear_data, write_nad):
    from na_description.features import NUM_FEATURES
    from na_training.baselines.compare import LEARNED, run_comparison

    free, contact = linear_data
    band = simulate(LINEAR, 50, "band", restriction_stiffness=0.6)
    nad = write_nad(tmp_path / "nad", [*free, *contact, band], split_seed=1)
    _constant_onnx_model(tmp_path / "model.onnx", NUM_FEATURES)
    results = run_comparison(nad, tmp_path / "model.onnx", tmp_path / "out")
    assert results["force_mae"][LEARNED]["free/0g"] == pytest.approx(0.0, abs=1e-9)   # zero force, zero label
    assert results["force_mae"][LEARNED]["push/0g"] > 0.1                               # the push is missed
    assert results["condition"][LEARNED]["accuracy"] == 1.0                             # nominal everywhere
    assert results["false_contact_rate"][LEARNED] == 0.0
    assert results["best_classical_to_learned_force_mae"] is not None


def test_compare_cli_refuses_bad_input_with_a_message(tmp_path, capsys):
    from na_training.baselines.compare import main_compare

    assert main_compare(["--nad", str(tmp_path / "missing"), "--out", str(tmp_path / "out")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main_compare(["--nad", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert "not a NAD directory" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_run_comparison_refuses_a_model_of_other_features_before_loading_the_nad(tmp_path):
    from na_description import load_spec
    from na_description.features import NUM_FEATURES, feature_names
    from na_training.baselines.compare import run_comparison

    names = feature_names(load_spec())
    swapped = [names[1], names[0], *names[2:]]
    _constant_onnx_model(tmp_path / "swapped.onnx", NUM_FEATURES, names=swapped)
    missing_nad = tmp_path / "no_nad_here"       # never reached: the model is checked first
    with pytest.raises(ValueError, match="different order") as refused:
        run_comparison(missing_nad, tmp_path / "swapped.onnx", tmp_path / "out")
    assert "\n" not in str(refused.value) and swapped[0] in str(refused.value)
    (tmp_path / "broken.onnx").write_bytes(b"\x08\x07not a protobuf")
    with pytest.raises(ValueError, match="not a readable ONNX model"):
        run_comparison(missing_nad, tmp_path / "broken.onnx", tmp_path / "out")
