"""Hypothesis strategies for the fuzzing tests: tool arguments and raw JSON-RPC messages.

Text carries everything a transport may choke on (NUL, lone surrogates, controls, huge runs);
example counts are bounded (MCP_ANALYSIS_FUZZ_EXAMPLES, default 30) so each fuzzing test stays
within its CI budget (about a minute on a busy 2-core machine).
"""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZ = settings(
    max_examples=int(os.environ.get("MCP_ANALYSIS_FUZZ_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Text with everything a transport may choke on: NUL, lone surrogates, controls, huge runs.
any_char = st.characters(blacklist_categories=())
nasty_text = st.one_of(
    st.text(any_char, max_size=200),
    st.sampled_from(["", " ", "\x00", "\ud800", "a\udfffb", "\u2028", "' OR 1=1 --", "%s%n", "../../etc/passwd"]),
    st.builds(lambda c, n: c * n, st.sampled_from(["x", "\x00", "é", "\ud800"]), st.integers(1, 20_000)),
)
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True), nasty_text
)
any_value = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
)
maybe = st.one_of(any_value, nasty_text)  # a well-typed-ish or a wrong-typed argument

TOOL_ARGS = {
    "search": st.fixed_dictionaries({"query": maybe}, optional={"limit": any_value, "session": any_value}),
    "list_documents": st.fixed_dictionaries({}, optional={"offset": any_value, "limit": any_value, "session": maybe}),
    "execute_code": st.fixed_dictionaries({"code": maybe}, optional={"session": any_value}),
    "cite": st.fixed_dictionaries(
        {"chunk_ids": st.one_of(st.lists(nasty_text, max_size=20), any_value)}, optional={"session": any_value}
    ),
    "new_analysis": st.fixed_dictionaries({}, optional={"session": any_value, "extra": any_value}),
    "analysis_state": st.fixed_dictionaries({}, optional={"session": any_value}),
}

methods = st.sampled_from(
    ["tools/call", "tools/list", "resources/list", "resources/read", "prompts/get", "ping", "initialize", "nope/x", ""]
)
raw_messages = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda v: json.dumps(v).encode(), any_value),
    st.builds(
        lambda i, m, p: json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": p}).encode(),
        json_scalars,
        methods,
        any_value,
    ),
    st.builds(
        lambda i, n, a: json.dumps(
            {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": n, "arguments": a}}
        ).encode(),
        st.integers(1000, 2000),
        st.sampled_from(sorted(TOOL_ARGS)),
        any_value,
    ),
)
