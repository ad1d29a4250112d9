"""The `execute_code` result: the output, or each field's head and tail and where the whole output is.

Charts share the result budget with the output: when both do not fit, the charts take at most
half of it, in the first of their forms that fits there (tooling/chart_output.py: rows, then
PNGs, then specs left out), and the output is shortened into the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from mcp_analysis.text import clip
from mcp_analysis.tooling.chart_output import ChartOut, chart_forms
from mcp_analysis.tooling.fitting import size

if TYPE_CHECKING:
    from mcp_analysis.sandbox.models import ExecutionResult

_OUTPUT_FIELDS = ("stdout", "stderr", "value", "error")


class ExecuteOutput(BaseModel):
    session: str
    execution: int = Field(description="Number of this execution in the session (see the state resource).")
    success: bool
    stdout: str = ""
    stderr: str = ""
    value: str | None = Field(None, description="repr() of the trailing expression.")
    error: str | None = None
    duration_ms: float = 0.0
    truncated: bool = False
    state_restored: bool = Field(False, description="The call was stopped; variables from before it are kept.")
    full_output: str | None = Field(None, description="Resource with the untruncated output, when cut here.")
    # Charts drawn by `await chart(spec)` (each PNG attached as image content when `image`). Left out
    # when empty, so a program that draws nothing returns what it always did, and left out of the
    # output schema, which every host reads in tools/list (docs/tools.md describes the entries).
    charts: SkipJsonSchema[list[ChartOut]] = Field(default_factory=list, exclude_if=lambda charts: not charts)

    @classmethod
    def of(
        cls, session: str, execution: int, result: ExecutionResult, charts: Sequence[ChartOut] = ()
    ) -> ExecuteOutput:
        fields = result.model_dump(exclude={"output_chars"})
        return cls(session=session, execution=execution, charts=list(charts), **fields)


#: A PNG as image content carries it: base64 text (what it costs the budget).
ImageData = str


def render_execution(out: ExecuteOutput) -> str:
    status = "ok" if out.success else "failed"
    parts = [f"execution {out.execution}: {status} in {out.duration_ms:.1f} ms"]
    if out.stdout:
        parts.append("stdout:\n" + out.stdout.rstrip("\n"))
    if out.stderr:
        parts.append("stderr:\n" + out.stderr.rstrip("\n"))
    if out.value is not None:
        parts.append("value: " + out.value)
    if out.error:
        parts.append("error:\n" + out.error)
    if out.full_output:
        parts.append(f"(output shortened; the whole output is in resource {out.full_output})")
    parts += [c.line() for c in out.charts]
    return "\n".join(parts)


def execution_result(
    out: ExecuteOutput, full_output_uri: str, note: str, budget: int, pngs: Sequence[ImageData] = ()
) -> tuple[ExecuteOutput, str, list[ImageData]]:
    """The output and charts within `budget` (see module docs); `pngs[i]` is `out.charts[i]`'s PNG.

    Returns the model, its text and the PNGs to attach (those of charts whose `image` held)."""
    bare: int | None = None  # the cost without charts, worked out only if the charts do not fit
    for form, charts in enumerate(chart_forms(out.charts)):
        images = [png for png, chart in zip(pngs, charts, strict=True) if chart.image]
        model = out.model_copy(update={"charts": charts}) if form else out  # the first form: as they are
        text = render_execution(model) + note
        whole = size(model, text) + sum(map(len, images))
        if whole <= budget:
            return model, text, images
        if bare is None:
            plain = out.model_copy(update={"charts": []})
            bare = size(plain, render_execution(plain) + note)
        if whole - bare <= budget // 2:
            break
    fitted, text = fit_output(model, full_output_uri, note, budget - sum(map(len, images)))
    return fitted, text, images


def fit_output(out: ExecuteOutput, full_output_uri: str, note: str, budget: int) -> tuple[ExecuteOutput, str]:
    """The output, or each field's head and tail with a marker naming the resource that holds all of it."""
    text = render_execution(out) + note
    if size(out, text) <= budget:
        return out, text
    how = f"not shown here; the whole output is in resource {full_output_uri}"
    fields = {k: getattr(out, k) for k in _OUTPUT_FIELDS if getattr(out, k)}

    def build(room: int) -> tuple[ExecuteOutput, str]:
        share = _allot({k: len(v) for k, v in fields.items()}, room)
        model = out.model_copy(
            update={k: clip(v, share[k], how)[0] for k, v in fields.items()}
            | {"truncated": True, "full_output": full_output_uri}
        )
        return model, render_execution(model) + note

    room = (budget - size(*build(0))) // 2  # each character is paid twice: text and structured
    while True:
        model, text = build(max(0, room))
        excess = size(model, text) - budget
        if excess <= 0 or room <= 0:
            return model, text
        room -= max(excess // 2 + 1, room // 10)


def _allot(lengths: dict[str, int], room: int) -> dict[str, int]:
    """Share `room` among fields: short ones (an error, a value) whole, long ones equally."""
    share: dict[str, int] = {}
    for i, key in enumerate(sorted(lengths, key=lengths.__getitem__)):
        share[key] = min(lengths[key], room // (len(lengths) - i))
        room -= share[key]
    return share
