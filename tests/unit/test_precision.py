"""``model.dtype: auto`` (rlvr.model.precision, rlvr.model.bf16_probe) and the machine record (rlvr.machine).

The measurement is faked (``bf16_probe.measure`` monkeypatched) except in one test that runs it for
real on a small model, to keep it fast.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from rlvr.config import ModelConfig, load_config
from rlvr.machine import FLAGS, cpu_info, machine_info, machine_line
from rlvr.model import bf16_probe, precision, precision_cache
from rlvr.model.io import load_policy, load_policy_as, save_policy
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.paths import cache_root
from rlvr.train.pretrain import base_model, pretrain_key
from rlvr.train.state import build_policy, resolve_precision

SMALL = ModelConfig(n_layer=1, d_model=32, n_head=2, context=64)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """Unpinned ``auto`` on a quiet CPU-only machine (a visible GPU resolves ``auto`` without measuring), a
    private cache, and a fake measurement: ``fake.ratio`` is what it reports, ``fake.calls`` the
    workloads it was asked to measure."""
    monkeypatch.delenv(precision.ENV_PIN, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # a quiet machine (the notes say when not)
    monkeypatch.setattr(precision_cache, "calibration_spread", lambda: 0.0)  # no timing decides a test

    class Fake:
        ratio = 2.0
        calls: list[dict] = []

        def __call__(self, spec):
            self.calls.append(spec)
            return {"ratio": self.ratio, "train_ratio": self.ratio, "decode_ratio": self.ratio, "repeats": 3}

    f = Fake()
    f.calls = []
    monkeypatch.setattr(bf16_probe, "measure", f)
    return f


def _tiny_checkpoint(d: Path, dtype: str = "auto") -> Path:
    tok = CharTokenizer()
    torch.manual_seed(0)
    save_policy(TinyGPT(SMALL.with_dtype(dtype), tok.vocab_size), tok, d)
    return d


# ----------------------------------------------------------------------------- machine record
def test_machine_info_keys_and_types():
    info = machine_info("float32")
    assert set(info) == {"cpu", "cpu_family", "cpu_model", "flags", "logical_cores", "torch_threads", "torch",
                         "python", "cuda_device", "precision", "kernels", "kernel_limits"}
    assert isinstance(info["cpu"], str) and info["cpu"]
    assert info["cpu_family"] is None or isinstance(info["cpu_family"], int)
    assert info["cpu_model"] is None or isinstance(info["cpu_model"], int)
    assert set(info["flags"]) == set(FLAGS) and all(isinstance(v, bool) for v in info["flags"].values())
    assert isinstance(info["logical_cores"], int) and info["logical_cores"] >= 1
    assert info["torch_threads"] == torch.get_num_threads() and info["torch"] == torch.__version__
    assert info["python"].count(".") == 2 and info["cuda_device"] is None and info["precision"] == "float32"
    json.dumps(info)  # what run directories store
    assert machine_info()["precision"] is None and machine_info(device="cpu")["cuda_device"] is None
    line = machine_line(info)
    assert info["cpu"] in line and "precision float32" in line and f"torch {torch.__version__}" in line
    assert machine_line(None) == "machine not recorded"


def test_kernels_held_down_are_recorded_shown_and_keyed(monkeypatch):
    """A process whose kernels are held to AVX2 says so in its line, and its bf16 measurement is kept
    apart from the CPU's native one (the 7x slower bf16 of docs/performance.md's AVX2 stand-in)."""
    from rlvr.machine import KERNEL_ENV, held_note, kernel_limits
    from rlvr.model.precision_cache import cache_key

    for k in KERNEL_ENV:
        monkeypatch.delenv(k, raising=False)
    plain = machine_info("float32")
    assert plain["kernel_limits"] == {} and "held" not in machine_line(plain)
    native_key = cache_key({"w": 1})
    assert "kernels" not in native_key  # ordinary processes keep their cached measurements
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    assert kernel_limits() == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
    held = machine_info("float32")
    line = machine_line({**held, "kernels": "AVX2"})
    assert "kernels AVX2 (held: ATEN_CPU_CAPABILITY=avx2, MKL_ENABLE_INSTRUCTIONS=AVX2)" in line
    assert line.index("torch threads") < line.index("kernels AVX2") < line.index("torch 2")
    assert cache_key({"w": 1}) != native_key and cache_key({"w": 1})["kernels"]["ATEN_CPU_CAPABILITY"] == "avx2"
    old = {k: v for k, v in held.items() if k not in ("kernels", "kernel_limits")}  # a record before the field
    assert "kernels" not in machine_line(old)
    assert held_note("", {"MKL_CBWR": "AVX2"}) == "kernels (held: MKL_CBWR=AVX2)" and held_note("AVX2", {}) == ""


def test_cpu_info_reads_the_first_processor_and_falls_back(tmp_path):
    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: Test CPU 9000\n"
                 "flags\t\t: fpu avx2 avx512f amx_bf16\n\nprocessor\t: 1\nmodel name\t: Other\n")
    info = cpu_info(f)
    assert info == {"model_name": "Test CPU 9000", "family": 25, "model": 17,
                    "flags": ["amx_bf16", "avx2", "avx512f", "fpu"]}
    missing = cpu_info(tmp_path / "nope")
    assert missing["family"] is None and missing["flags"] == [] and isinstance(missing["model_name"], str)


# ----------------------------------------------------------------------------- resolution
def test_auto_resolves_by_the_measurement(fake):
    fake.ratio = 2.9
    p = precision.resolve_dtype("auto", "cpu", bf16_probe.tiny_spec(SMALL))
    assert p.dtype == "bfloat16" and p.requested == "auto"
    assert p.line() == ("precision: bfloat16 (bfloat16 measured 2.90x as fast as float32 on this CPU; "
                        "set model.dtype to choose)")
    assert p.reason.startswith("bf16 autocast 2.90x faster than fp32 at this model's shapes (train 2.90x, "
                               "decode 2.90x;")
    assert "cached as bf16-" in p.reason and str(cache_root()) not in p.reason  # file name only (published)
    assert "cached" not in p.line()  # the numbers: reason
    fake.ratio = 0.03
    other = ModelConfig(n_layer=1, d_model=64, n_head=2)  # another shape: measured on its own
    q = precision.resolve_dtype("auto", "cpu", bf16_probe.tiny_spec(other))
    assert q.dtype == "float32" and "bf16 autocast 0.03x the speed of fp32" in q.reason
    assert q.line() == ("precision: float32 (bfloat16 measured 0.03x as fast as float32 on this CPU; "
                        "set model.dtype to choose)")
    fake.ratio = 1.05  # faster, but under the margin
    third = ModelConfig(n_layer=1, d_model=96, n_head=2)
    r = precision.resolve_dtype("auto", "cpu", bf16_probe.tiny_spec(third))
    assert r.dtype == "float32" and r.line() == ("precision: float32 (bfloat16 measured 1.05x as fast as float32 "
                                                 "on this CPU, under the 1.1x it needs; set model.dtype to choose)")
    assert len(fake.calls) == 3


def test_measurement_is_cached_once_and_reused(fake):
    spec = bf16_probe.tiny_spec(SMALL)
    a = precision.resolve_dtype("auto", "cpu", spec)
    files = list((cache_root() / "machine").glob("bf16-*.json"))
    assert len(files) == 1 and len(fake.calls) == 1
    stored = json.loads(files[0].read_text())
    assert stored["ratio"] == 2.0 and stored["key"]["workload"] == spec and stored["measured"]
    assert stored["key"]["threads"] == torch.get_num_threads() and stored["key"]["torch"] == torch.__version__
    fake.ratio = 0.5  # a second call must not measure again (it would now say float32)
    b = precision.resolve_dtype("auto", "cpu", lambda: spec)
    assert b.dtype == a.dtype == "bfloat16" and len(fake.calls) == 1
    n = torch.get_num_threads()  # the thread count is part of the key
    torch.set_num_threads(n + 1)
    try:
        assert precision.resolve_dtype("auto", "cpu", spec).dtype == "float32" and len(fake.calls) == 2
    finally:
        torch.set_num_threads(n)


@pytest.mark.parametrize("garbage", ["{not json", '{"ratio": "fast"}', '{"ratio": -1, "key": {}}', "[]"])
def test_a_corrupt_cache_file_is_measured_again(fake, garbage):
    spec = bf16_probe.tiny_spec(SMALL)
    path = precision_cache.cache_path(precision_cache.cache_key(spec))
    path.parent.mkdir(parents=True)
    path.write_text(garbage)
    with pytest.warns(RuntimeWarning, match="unreadable precision measurement"):
        p = precision.resolve_dtype("auto", "cpu", spec)
    assert p.dtype == "bfloat16" and len(fake.calls) == 1
    assert json.loads(path.read_text())["ratio"] == 2.0  # rewritten whole


def test_cuda_picks_by_bf16_support_without_measuring(fake, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Fake GPU")
    for supported, want in ((True, "bfloat16"), (False, "float32")):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, s=supported, **k: s)
        p = precision.resolve_dtype("auto", torch.device("cuda"), lambda: pytest.fail("no shapes on CUDA"))
        assert p.dtype == want and "Fake GPU" in p.reason
        assert p.line() == f"precision: {want} (the Fake GPU {'supports' if supported else 'has no'} bfloat16" + (
            "" if supported else " support") + "; set model.dtype to choose)"
    assert fake.calls == []
    hf = ModelConfig(kind="hf", path="/nowhere")  # HF models resolve the same way
    assert precision.resolve_dtype(hf.dtype, "cuda", lambda: precision.config_spec(hf)).dtype == "float32"


def test_explicit_dtypes_pins_and_unknown_shapes(fake, monkeypatch):
    for d in ("float32", "bfloat16"):
        p = precision.resolve_dtype(d, "cpu", lambda: pytest.fail("not measured"))
        assert p.dtype == d and p.line() == f"precision: {d} (model.dtype={d} in the config)"
    monkeypatch.setenv(precision.ENV_PIN, "bfloat16")
    pinned = precision.resolve_dtype("auto", "cpu", None)
    assert pinned.dtype == "bfloat16"
    assert pinned.line() == ("precision: bfloat16 (model.dtype=auto, pinned by RLVR_AUTO_DTYPE=bfloat16 in the "
                             "environment)")
    monkeypatch.setenv(precision.ENV_PIN, "fp16")
    with pytest.raises(Exception, match="RLVR_AUTO_DTYPE"):
        precision.resolve_dtype("auto", "cpu", None)
    monkeypatch.delenv(precision.ENV_PIN)
    unknown = precision.resolve_dtype("auto", "cpu", lambda: None)
    assert unknown.dtype == "float32" and unknown.line() == (
        "precision: float32 (the model's shapes are unknown, so bfloat16 was not measured; set model.dtype to choose)")
    assert precision.resolve_dtype("auto", "meta", None).dtype == "float32"
    assert fake.calls == []
    with pytest.raises(Exception, match="model.dtype"):
        ModelConfig(dtype="fp16")
    assert ModelConfig().dtype == "auto"


def test_specs_match_the_models():
    m = TinyGPT(ModelConfig(n_layer=3, d_model=48, n_head=2, mlp="gelu", dtype="float32"), 50)
    spec = precision.model_spec(m)
    assert spec == {"kind": "tiny", "n_layer": 3, "d_model": 48, "n_head": 2, "mlp": "gelu", "context": 96,
                    "fp32_logits": True}
    assert spec == bf16_probe.tiny_spec(m.cfg.with_dtype("auto"))  # the dtype is not in it; the depth is
    spec = bf16_probe.hf_spec({"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                              "intermediate_size": 256})
    assert spec == {"kind": "linear", "shapes": [[64, 64], [64, 32], [64, 32], [64, 64], [64, 256], [64, 256],
                                                 [256, 64]]}
    assert bf16_probe.hf_spec({"vocab_size": 10}) is None


def test_real_measurement_is_fast_and_well_formed(monkeypatch):
    # a budget of 0 stops after the 3rd repeat on any CPU (0.3 s let a fast Zen 5 reach 5; no timing is asserted)
    monkeypatch.setattr(bf16_probe, "BUDGET_S", 0.0)
    m = bf16_probe.measure(bf16_probe.tiny_spec(SMALL))
    assert m["repeats"] in (1, 3) and m["spread"] >= 0
    assert {"ratio", "train_ratio", "decode_ratio", "fp32_s", "bf16_s", "repeats", "train_tokens"} <= set(m)
    assert all(m[k] > 0 for k in ("ratio", "train_ratio", "decode_ratio", "fp32_s", "bf16_s"))
    # the tiny workload is the benchmark's RL step: 64 prompts x 8 samples decoded, then the same rows
    # (prompt + completion under a key mask) trained on: decoding and training in a real step's proportions
    T = bf16_probe.RL_PROMPT_TOKENS + bf16_probe.RL_NEW_TOKENS
    rows = bf16_probe.STEP_PROMPTS * bf16_probe.STEP_GROUP
    assert m["decode_rows"] == rows and m["decode_steps"] == bf16_probe.RL_NEW_TOKENS
    assert (m["prompts"], m["group"]) == (bf16_probe.STEP_PROMPTS, bf16_probe.STEP_GROUP)
    assert rows * (T - bf16_probe.RL_PROMPT_TOKENS // 3) <= m["train_tokens"] <= rows * T
    state = torch.get_rng_state()
    bf16_probe.measure(bf16_probe.hf_spec({"hidden_size": 32, "num_attention_heads": 2}))
    assert torch.equal(torch.get_rng_state(), state)  # the global RNG is untouched


def test_a_wide_tiny_model_is_measured_on_fewer_rows():
    g = torch.Generator().manual_seed(0)
    full = bf16_probe.STEP_PROMPTS * bf16_probe.STEP_GROUP
    wide = bf16_probe.tiny_spec(ModelConfig(n_layer=1, d_model=256, n_head=4))
    _, sizes = bf16_probe._tiny_run(wide, g, 1.0)
    assert 8 <= sizes["decode_rows"] < full and sizes["group"] == bf16_probe.STEP_GROUP  # fewer prompts, 8 each
    deep = bf16_probe.tiny_spec(ModelConfig(n_layer=4, d_model=256, n_head=4))  # every layer counts
    assert bf16_probe._tiny_run(deep, g, 1.0)[1]["decode_rows"] < sizes["decode_rows"]
    _, small = bf16_probe._tiny_run(bf16_probe.tiny_spec(SMALL), g, 1.0)
    assert small["decode_rows"] == full


def test_busy_machine_is_named_in_the_choice():
    key = {"threads": 1}
    assert precision_cache.busy_note({"load": 2.3, "cores": 2, "key": key}) == (
        " on a busy machine (load 2.3, 2 cores: the ratio may be off)")
    assert precision_cache.busy_note({"load": 0.4, "cores": 2, "key": key}) == ""
    assert precision_cache.busy_note({"load": 3.0, "cores": 16, "key": {"threads": 8}}) == ""
    assert precision_cache.busy_note({}) == ""  # a measurement cached before the load was recorded


def test_a_busy_machine_is_not_measured_and_nothing_is_cached(fake, monkeypatch):
    spec = bf16_probe.tiny_spec(SMALL)
    monkeypatch.setattr(os, "getloadavg", lambda: (64.0, 0.0, 0.0))
    p = precision.resolve_dtype("auto", "cpu", spec)
    cores = os.cpu_count()
    assert p.dtype == "float32" and fake.calls == []
    assert p.line() == (f"precision: float32 (this machine is busy (load 64.0 on {cores} cores), so bfloat16 was "
                        "not measured and nothing cached; set model.dtype to choose)")
    assert not (cache_root() / "machine").exists()
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # quiet load, but a calibration loop that wobbles
    monkeypatch.setattr(precision_cache, "calibration_spread", lambda: 0.8)
    q = precision.resolve_dtype("auto", "cpu", spec)
    assert q.dtype == "float32" and "a calibration loop's times spread 80% (over 25%)" in q.line()
    monkeypatch.setattr(precision_cache, "calibration_spread", lambda: 0.0)  # busy while measuring: not cached
    fake_spread = {"ratio": 2.0, "train_ratio": 2.0, "decode_ratio": 2.0, "repeats": 3, "spread": 0.9}
    monkeypatch.setattr(bf16_probe, "measure", lambda s: fake_spread)
    r = precision.resolve_dtype("auto", "cpu", spec)
    assert r.dtype == "float32" and "float32 repeats spread 90% while measuring" in r.line()
    assert not list((cache_root() / "machine").glob("bf16-*.json"))
    monkeypatch.setattr(bf16_probe, "measure", fake)  # quiet: measured and cached
    assert precision.resolve_dtype("auto", "cpu", spec).dtype == "bfloat16" and len(fake.calls) == 1


def test_a_measurement_cached_on_a_busy_machine_says_so(fake, monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    spec = bf16_probe.tiny_spec(SMALL)
    precision.resolve_dtype("auto", "cpu", spec)  # cached, then the record edited as an older rule wrote it
    path = precision_cache.cache_path(precision_cache.cache_key(spec))
    path.write_text(json.dumps({**json.loads(path.read_text()), "load": 64.0, "cores": 2}))
    p = precision.resolve_dtype("auto", "cpu", spec)
    assert p.line() == ("precision: bfloat16 (bfloat16 measured 2.00x as fast as float32 on this CPU, which was "
                        "busy then; set model.dtype to choose)")
    assert "on a busy machine (load 64.0" in p.reason


# ----------------------------------------------------------------------------- where it is used
def test_run_config_and_policy_get_the_resolved_dtype(fake, tmp_path):
    ck = _tiny_checkpoint(tmp_path / "init", dtype="float32")
    cfg = load_config("quickstart", [f"model.init_from={ck}", "model.d_model=32", "model.n_head=2"])
    assert cfg.model.dtype == "auto"
    resolved, p = resolve_precision(cfg)
    assert resolved.model.dtype == p.dtype == "bfloat16" and cfg.model.dtype == "auto"
    assert fake.calls == [bf16_probe.tiny_spec(SMALL)]  # init_from's own shapes
    model, _ = build_policy(resolved, "none")
    assert model.cfg.dtype == "bfloat16"  # the run's dtype, not the checkpoint's float32
    model, _ = build_policy(cfg, "none")  # still auto: resolved there, from the cache
    assert model.cfg.dtype == "bfloat16" and len(fake.calls) == 1


def test_policy_takes_the_runs_fp32_logits_not_the_checkpoints(tmp_path):
    """model.fp32_logits=false on a run from a checkpoint saved with true: the LM head then runs in
    bf16 under bf16 autocast (an ablation that silently kept FP32 logits before)."""
    ck = _tiny_checkpoint(tmp_path / "init", dtype="float32")  # saved with fp32_logits: true (the default)
    over = [f"model.init_from={ck}", "model.d_model=32", "model.n_head=2", "model.dtype=bfloat16"]
    fp32, _ = build_policy(load_config("quickstart", over), "none")
    bf16, _ = build_policy(load_config("quickstart", [*over, "model.fp32_logits=false"]), "none")
    assert fp32.cfg.fp32_logits and not bf16.cfg.fp32_logits and bf16.cfg.dtype == "bfloat16"
    h = torch.randn(2, 3, 32)
    exact = torch.nn.functional.linear(h, fp32.lm_head.weight)  # float32 reference
    assert torch.allclose(fp32.logits(h), exact, atol=1e-5)
    rounded = bf16.logits(h)
    assert rounded.dtype == torch.float32 and not torch.allclose(rounded, exact, atol=1e-5)  # bf16 rounding
    assert torch.allclose(rounded, exact, atol=0.05)


@pytest.mark.filterwarnings("ignore:step 1:RuntimeWarning")
def test_a_run_saves_the_resolved_dtype_and_its_machine(fake, tmp_path, capsys):
    from rlvr.train.loop import train

    fake.ratio = 0.5
    ck = _tiny_checkpoint(tmp_path / "init")
    over = [f"model.init_from={ck}", "model.d_model=32", "model.n_head=2", "model.context=64", "train.steps=1",
            "algo.prompts_per_step=2", "algo.group_size=2", "sampling.max_new_tokens=8",
            "sampling.interruption_budget=0", "train.eval_problems=2", "log.progress=none",
            "task.retention_tasks=[]", f"train.out_dir={tmp_path}"]
    run = train(load_config("quickstart", over), run_dir=tmp_path / "run", progress="none")
    saved = load_config(run / "config.yaml")
    assert saved.model.dtype == "float32"  # the resolved value, not "auto"
    machine = json.loads((run / "machine.json").read_text())
    assert machine["precision"] == "float32" and set(machine) >= {"cpu", "flags", "torch_threads"}
    assert json.loads((run / "train_summary.json").read_text())["machine"] == machine
    line = "precision: float32 (bfloat16 measured 0.50x as fast as float32 on this CPU; set model.dtype to choose)"
    assert line in capsys.readouterr().err.splitlines()  # one line in plain words; the numbers in machine.json
    assert machine["precision_reason"].startswith("bf16 autocast 0.50x the speed of fp32 at this model's shapes (train")
    step = sorted((run / "checkpoints").iterdir())[-1]
    assert json.loads((step / "model_config.json").read_text())["dtype"] == "float32"


def test_load_policy_resolves_a_saved_auto(fake, tmp_path):
    auto = _tiny_checkpoint(tmp_path / "auto")
    model, _ = load_policy(auto, device="cpu")
    assert model.cfg.dtype == "bfloat16" and precision.checkpoint_precision(auto).dtype == "bfloat16"
    kept = _tiny_checkpoint(tmp_path / "f32", dtype="float32")
    assert load_policy(kept)[0].cfg.dtype == "float32" and precision.saved_dtype(kept) == "float32"
    assert precision.saved_dtype(tmp_path / "nothing") == "auto"
    assert len(fake.calls) == 1


def test_pretraining_keeps_its_float32_key(monkeypatch, tmp_path):
    """auto, float32 and bfloat16 configs share one float32 base: the cache key of the old default."""
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path))
    pre = load_config("quickstart").pretrain
    seen = []

    def fake_pretrain(model_cfg, pre_cfg, out, progress="auto"):
        seen.append(model_cfg.dtype)
        (Path(out) / "final").mkdir(parents=True)
        (Path(out) / "final" / "model.safetensors").write_text("x")
        (Path(out) / "pretrain.json").write_text("{}")
        return Path(out) / "final"

    monkeypatch.setattr("rlvr.train.pretrain.pretrain", fake_pretrain)
    dirs = {d: base_model(ModelConfig(dtype=d), pre, "none") for d in ("auto", "float32", "bfloat16")}
    assert len(set(dirs.values())) == 1 and seen == ["float32"]
    assert dirs["auto"].parent.name == pretrain_key(ModelConfig(dtype="float32"), pre)


def test_excursion_cells_compute_as_the_run_says(tmp_path):
    """An excursion cell starts from a milestone checkpoint saved in float32 with FP32 logits; the run's
    model.dtype and model.fp32_logits win (the cells kept the checkpoint's before)."""
    ck = _tiny_checkpoint(tmp_path / "milestone", dtype="float32")
    over = ["model.d_model=32", "model.n_head=2", "model.dtype=bfloat16", "model.fp32_logits=false"]
    model, _ = load_policy_as(ck, load_config("quickstart", over).model)
    assert model.cfg.dtype == "bfloat16" and not model.cfg.fp32_logits
    plain = load_config("quickstart", ["model.d_model=32", "model.n_head=2", "model.dtype=float32"])
    same, _ = load_policy_as(ck, plain.model)
    assert same.cfg.dtype == "float32" and same.cfg.fp32_logits


def test_loading_as_a_run_measures_only_the_runs_auto(fake, tmp_path):
    """A checkpoint saved with ``dtype: auto`` loaded for a run with an explicit dtype is not measured
    (the measurement would be overridden); a run asking for ``auto`` is measured once."""
    ck = _tiny_checkpoint(tmp_path / "saved_auto", dtype="auto")
    model, _ = load_policy_as(ck, SMALL.with_dtype("float32"))
    assert model.cfg.dtype == "float32" and fake.calls == []
    model, _ = load_policy_as(ck, SMALL.with_dtype("auto"))
    assert model.cfg.dtype == "bfloat16" and len(fake.calls) == 1  # fake.ratio 2.0
    model, _ = load_policy(ck)  # the checkpoint's own auto, now cached
    assert model.cfg.dtype == "bfloat16" and len(fake.calls) == 1


# ----------------------------------------------------------------------------- re-validation by real steps
BENCH = precision.step_shape(8, 8, 32)  # `benchmarks/speed/vs_trl.py --quick`: 8 prompts x 8 samples of 32 tokens


def test_real_steps_overturn_a_cached_choice_that_is_the_slower_one(fake):
    """Issue 53: the cached probe said bf16 1.38x; the real step then ran 0.168 s in bf16, 0.083 s in float32.
    Once real steps of both precisions are recorded at the benchmark's shapes, auto picks the faster."""
    fake.ratio = 1.38
    spec = bf16_probe.tiny_spec(SMALL)
    first = precision.resolve_dtype("auto", "cpu", spec, BENCH)
    assert first.dtype == "bfloat16" and first.workload == spec
    precision_cache.record_steps(spec, BENCH, "bfloat16", [0.170, 0.168, 0.166], first.measurement)
    assert precision.resolve_dtype("auto", "cpu", spec, BENCH).dtype == "bfloat16"  # one precision: the probe's
    said = precision_cache.record_steps(spec, BENCH, "float32", [0.083, 0.084, 0.082], None)
    assert said == "real steps in float32: 0.083 s (median of 3)"
    p = precision.resolve_dtype("auto", "cpu", spec, BENCH)
    assert p.dtype == "float32", "the cached choice is the slower one on the benchmark's shapes"
    assert p.line() == ("precision: float32 (real RL steps on this CPU: float32 0.083 s, bfloat16 0.168 s (0.49x; "
                        "needs >= 1.1x); set model.dtype to choose)")
    assert precision.resolve_dtype("auto", "cpu", spec, precision.step_shape(16, 8, 32)).dtype == "bfloat16"
    precision_cache.record_steps(spec, BENCH, "bfloat16", [0.05] * 3, None)  # real bf16 steps 1.66x faster
    assert precision.resolve_dtype("auto", "cpu", spec, BENCH).dtype == "bfloat16"
    assert len(fake.calls) == 1


def test_real_bf16_steps_far_slower_than_the_probe_predicted_invalidate_it(fake, monkeypatch):
    spec = bf16_probe.tiny_spec(SMALL)
    probe = {"ratio": 1.38, "train_ratio": 2.51, "decode_ratio": 0.54, "repeats": 3, "bf16_s": 0.01,
             "decode_rows": 64}
    monkeypatch.setattr(bf16_probe, "measure", lambda s: probe)
    chosen = precision.resolve_dtype("auto", "cpu", spec, BENCH)
    assert chosen.dtype == "bfloat16"
    # 0.015 s for the probe's 64 rows: within 2x of its prediction, nothing invalidated
    assert "invalidated" not in precision_cache.record_steps(spec, BENCH, "bfloat16", [0.015] * 5, chosen.measurement)
    assert precision.resolve_dtype("auto", "cpu", spec, BENCH).dtype == "bfloat16"
    said = precision_cache.record_steps(spec, BENCH, "bfloat16", [0.168] * 5, chosen.measurement)
    assert "16.8x slower than the probe predicted (0.010 s)" in said and "invalidated" in said
    p = precision.resolve_dtype("auto", "cpu", spec, BENCH)
    assert p.dtype == "float32" and "ran far slower than the probe predicted (0.168 s)" in p.line()


def test_real_steps_are_not_recorded_on_a_busy_machine(fake, monkeypatch):
    spec = bf16_probe.tiny_spec(SMALL)
    monkeypatch.setattr(os, "getloadavg", lambda: (64.0, 0.0, 0.0))
    said = precision_cache.record_steps(spec, BENCH, "float32", [0.083] * 5, None)
    assert said.startswith("real-step timings not recorded: this machine is busy (load 64.0")
    assert precision_cache.real_steps(spec, BENCH) == {}


def test_a_run_times_its_first_steps_after_the_first_and_records_them_once(fake, tmp_path):
    from rlvr.train.precision_check import TIMED_STEPS, checked_workload, run_shape, step_timer

    cfg = load_config("quickstart", ["model.n_layer=1", "model.d_model=32", "model.n_head=2"])
    auto = precision.resolve_dtype("auto", "cpu", bf16_probe.tiny_spec(cfg.model), run_shape(cfg))
    timer = step_timer(cfg, auto, "cpu")
    lines = [timer.add({"gen_s": 9.0, "train_s": 9.0})]  # the first step warms up: not timed
    lines += [timer.add({"gen_s": 0.05, "train_s": 0.03 + 0.001 * i}) for i in range(TIMED_STEPS + 2)]
    assert [bool(x) for x in lines] == [False] * TIMED_STEPS + [True, False, False]
    assert precision_cache.real_steps(auto.workload, run_shape(cfg))["bfloat16"]["step_s"] == pytest.approx(0.082)
    explicit = precision.resolve_dtype("float32", "cpu", None)
    assert checked_workload(cfg, explicit, "cpu") == auto.workload  # auto measured here before: recorded too
    other = load_config("quickstart", ["model.n_layer=1", "model.d_model=64", "model.n_head=2"])
    assert checked_workload(other, explicit, "cpu") is None  # never measured: nothing to re-validate
    assert checked_workload(cfg, auto, "cuda") is None
