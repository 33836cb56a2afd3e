"""Settings the GPU paths cannot honour are refused up front (issue 29, items 4-5), on the CPU:
top-p / top-k with the vLLM engine (vLLM renormalises its processed log-probs over the kept tokens,
the trainer does not), the Ray backend with a CUDA train.device (its actors reserve only CPUs),
torchrun data parallel with the vLLM engine, and the vLLM constructor's argument check."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from rlvr.config import ConfigError, load_config
from rlvr.errors import UserError
from rlvr.rollout import vllm as V
from rlvr.train.distributed import DataParallelSource

VLLM = ["model.kind=hf", "model.path=tiny-hf:llama", "sampling.engine=vllm"]


@pytest.mark.parametrize(("override", "key"), [("sampling.top_p=0.9", "sampling.top_p"),
                                                ("sampling.top_k=20", "sampling.top_k")])
def test_vllm_refuses_truncated_sampling(override, key):
    with pytest.raises(ConfigError, match=rf"^{key}: must be .* with sampling.engine=vllm .*renormalises") as e:
        load_config(None, [*VLLM, override])
    assert "\n" not in str(e.value)
    load_config(None, [override])  # the native sampler keeps untruncated log-probs: fine
    load_config(None, [*VLLM, "sampling.top_p=1.0", "sampling.top_k=0"])


@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_ray_backend_refuses_a_cuda_device(device):
    ray = ["pipeline.mode=async", "pipeline.backend=ray", f"train.device={device}"]
    with pytest.raises(ConfigError, match=r"^pipeline.backend: ray actors reserve only CPUs") as e:
        load_config(None, ray)
    assert "\n" not in str(e.value)
    for ok in (["train.device=cpu"], ["train.device=auto"], ["pipeline.backend=local"], ["pipeline.mode=sync"]):
        load_config(None, [*ray, *ok])


def test_data_parallel_refuses_the_vllm_engine():
    st = SimpleNamespace(cfg=load_config(None, VLLM))
    with pytest.raises(UserError, match=r"data parallel does not run the vLLM engine.*sampling.engine=native"):
        DataParallelSource(st)
    native = SimpleNamespace(cfg=dataclasses.replace(st.cfg, sampling=dataclasses.replace(
        st.cfg.sampling, engine="native")))
    assert DataParallelSource(native).world == 1


# ----------------------------------------------------------------------------- vLLM constructor
def _fake_vllm(llm_init, engine_args=None):
    made = {}

    class LLM:
        def __init__(self, *a, **kw):
            llm_init(**kw)
            made.update(kw)

    mod = SimpleNamespace(LLM=LLM, SamplingParams=dict, __version__="0.0.fake")
    if engine_args is not None:
        mod.EngineArgs = engine_args
    return mod, made


@dataclasses.dataclass
class _EngineArgs:
    model: str = ""
    dtype: str = "auto"
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    seed: int = 0
    max_logprobs: int = 20
    logprobs_mode: str = "raw_logprobs"


def test_vllm_unknown_argument_is_named(monkeypatch):
    old = dataclasses.make_dataclass("Old", [(f.name, f.type, f) for f in dataclasses.fields(_EngineArgs)
                                             if f.name != "logprobs_mode"])
    mod, _ = _fake_vllm(lambda **kw: None, old)
    monkeypatch.setattr(V, "import_vllm", lambda: mod)
    with pytest.raises(UserError, match=r"vLLM 0.0.fake does not take logprobs_mode; pip install"):
        V.VLLMEngine("m")
    assert V.unknown_llm_args(mod, {"model": 1, "bogus": 2}) == ["bogus"]


def test_vllm_type_error_inside_the_constructor_keeps_its_message_and_traceback(monkeypatch):
    def broken(**kw):
        raise TypeError("unsupported operand type(s) for *: 'NoneType' and 'int'")

    mod, _ = _fake_vllm(broken, _EngineArgs)
    monkeypatch.setattr(V, "import_vllm", lambda: mod)
    with pytest.raises(TypeError, match="unsupported operand") as e:  # not reported as an unknown argument
        V.VLLMEngine("m")
    assert e.traceback[-1].name == "broken"


def test_vllm_known_arguments_reach_the_constructor(monkeypatch):
    mod, made = _fake_vllm(lambda **kw: None, _EngineArgs)
    monkeypatch.setattr(V, "import_vllm", lambda: mod)
    eng = V.VLLMEngine("m", gpu_memory_utilization=0.2, entropy_topk=5)
    assert made["logprobs_mode"] == "processed_logprobs" and made["gpu_memory_utilization"] == 0.2
    assert eng.version == 0 and eng.entropy_topk == 5
