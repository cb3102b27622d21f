"""The paper pool's columns and the allowed values of its tag columns, in one place.

The pool is two CSV files in the survey artifact's conventions: comma-separated UTF-8 text
without a byte-order mark, one header line, one entry per line. A tag that does not apply is
written ``NA`` (a value of its own, counted like any other); an absent arXiv id or note is an
empty field. Several URLs in one field are separated by ``;``.

Example:
    >>> PAPER_COLUMNS["reward_type"].values["hybrid"]
    'hybrid local-global reward (R8)'
    >>> [c.name for c in PAPER_COLUMNS.values() if c.values][:3]
    ['category', 'is_rl', 'reward_type']
    >>> "stage" in EXCLUDED_COLUMNS
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "EXCLUDED_COLUMNS",
    "NA",
    "OPTIONAL_COLUMNS",
    "PAPER_COLUMNS",
    "Column",
    "describe",
]

#: How a tag that does not apply is written.
NA = "NA"


@dataclass(frozen=True)
class Column:
    """One column of a pool file.

    Attributes:
        name: Header name.
        meaning: What the column holds.
        values: Allowed values and their meaning; empty for free text.
        required: The column must be in the header.
        empty_ok: The field may be empty (free-text columns only).
        kind: How the field is checked beyond ``values``: ``"text"``, ``"key"``, ``"year"``,
            ``"arxiv"``, ``"urls"``, ``"date"``, ``"identifier"``, ``"count"`` or
            ``"decisions"``.
    """

    name: str
    meaning: str
    values: dict[str, str] = field(default_factory=dict)
    required: bool = True
    empty_ok: bool = False
    kind: str = "text"


def _columns(*cols: Column) -> dict[str, Column]:
    return {c.name: c for c in cols}


#: Columns of ``papers.csv`` (the retained pool), in the artifact's order.
PAPER_COLUMNS: dict[str, Column] = _columns(
    Column("key", "unique short id of the entry (letters, digits, '.', '_', '-')", kind="key"),
    Column("title", "title of the work"),
    Column("first_author", "first author ('Last, First') or the team"),
    Column("affiliation", "first author's affiliation ('unknown' when not stated)"),
    Column("year", "year of publication", kind="year"),
    Column(
        "arxiv_id", "arXiv identifier (YYMM.NNNNN); empty when none", empty_ok=True, kind="arxiv"
    ),
    Column("venue", "where it appeared"),
    Column("url", "link(s) to the work; several separated by ';'", kind="urls"),
    Column(
        "category",
        "kind of entry",
        {
            "rl_method": "RL or post-training method",
            "survey": "survey or overview",
            "benchmark": "benchmark or evaluation",
            "framework": "framework or system",
            "industry": "industrial system or report",
            "classical_marl": "classical multi-agent RL foundation",
        },
    ),
    Column(
        "is_rl",
        "whether the work trains with RL",
        {"yes": "trains with RL", "no": "no RL", "partial": "partly (search, evolution, RL parts)"},
    ),
    Column(
        "reward_type",
        "reward family the work optimises",
        {
            "shared": "shared team / outcome reward (R1)",
            "individual": "individual agent reward (R2)",
            "role": "role-specific reward (R3)",
            "process": "process reward over steps or turns (R4)",
            "tool": "tool-use reward (R5)",
            "debate": "debate reward (R6)",
            "verifier": "verifier / judge reward (R6)",
            "orchestration": "orchestration reward (R7)",
            "hybrid": "hybrid local-global reward (R8)",
            NA: "no reward tagged",
        },
    ),
    Column(
        "credit_granularity",
        "finest unit that receives reward, credit or a design signal",
        {
            "token": "tokens",
            "turn": "turns (one agent step)",
            "message": "inter-agent messages",
            "tool": "tool calls",
            "agent": "agents",
            "role": "roles",
            "orchestrator": "orchestrator decisions",
            "team": "the whole team",
            NA: "no credit unit tagged",
        },
    ),
    Column(
        "orchestration_form",
        "how the agents are organised",
        {
            "centralized": "one orchestrator dispatches to sub-agents and aggregates",
            "planner_executor_critic": "specialised roles with a critic feedback loop",
            "debate": "agents argue, a resolver decides",
            "swarm": "many near-homogeneous agents run in parallel, then aggregate",
            "hierarchical": "multi-level spawning across agent layers",
            "harness": "a harness wraps model, tools, prompts and execution",
            NA: "no orchestration form tagged",
        },
    ),
    Column(
        "scenario",
        "application domain",
        {
            "coding": "software engineering",
            "web": "web and browser tasks",
            "research": "research and search",
            "math": "mathematical reasoning",
            "tool_use": "tool use",
            "debate": "debate",
            "general": "general or several domains",
            NA: "no scenario tagged",
        },
    ),
    Column(
        "is_core",
        "role of the entry in the survey",
        {
            "core": "load-bearing evidence",
            "supporting": "supporting evidence",
            "case": "industrial case",
        },
    ),
    Column("one_liner", "one-line summary"),
    Column(
        "verified",
        "whether the metadata was checked against the source",
        {"yes": "checked", "partial": "partly checked", "no": "not checked"},
    ),
    Column("notes", "free-text notes", empty_ok=True),
)

#: Optional columns of ``papers.csv`` used when present (``NA`` or empty when unknown).
OPTIONAL_COLUMNS: dict[str, Column] = _columns(
    Column(
        "team_size",
        "agents in the largest reported run (for the scale plot)",
        required=False,
        empty_ok=True,
        kind="count",
    ),
    Column(
        "trace_length",
        "events (or steps) in the longest reported run (for the scale plot)",
        required=False,
        empty_ok=True,
        kind="count",
    ),
    Column(
        "subdecisions",
        "orchestration sub-decisions the work learns, e.g. 'O1;O5' (O1 spawn, O2 delegate, "
        "O3 communicate, O4 aggregate, O5 stop)",
        required=False,
        empty_ok=True,
        kind="decisions",
    ),
)

#: Columns of ``excluded.csv`` (screening decisions), in the artifact's order.
EXCLUDED_COLUMNS: dict[str, Column] = _columns(
    Column("record_id", "unique id of the decision (e.g. E001)", kind="key"),
    Column("source", "where the record was found"),
    Column("query_family", "search query family that found it"),
    Column("screening_label", "title or label of the record"),
    Column("identifier", "identifier, e.g. 'arXiv:2305.14325'", kind="identifier"),
    Column("url", "link(s) to the record", kind="urls"),
    Column("date_screened", "date of the decision (YYYY-MM-DD)", kind="date"),
    Column(
        "stage",
        "screening stage that excluded it",
        {
            "abstract_screen": "excluded on the abstract",
            "full_text_screen": "excluded after reading the full text",
            "artifact_screen": "excluded after inspecting a product page, docs or code",
            "duplicate_screen": "excluded as overlapping retained evidence",
        },
    ),
    Column("exclusion_reason", "why it was excluded"),
)


def describe() -> str:
    """The taxonomy as Markdown: every column, its meaning and its allowed values.

    Example:
        >>> text = describe()
        >>> "| `reward_type` | `hybrid` | hybrid local-global reward (R8) |" in text
        True
    """
    out: list[str] = []
    for title, cols in (
        ("papers.csv (retained entries)", PAPER_COLUMNS),
        ("papers.csv, optional columns", OPTIONAL_COLUMNS),
        ("excluded.csv (screening decisions)", EXCLUDED_COLUMNS),
    ):
        out += [f"## {title}", "", "| column | value | meaning |", "|---|---|---|"]
        for c in cols.values():
            if c.values:
                out.append(f"| `{c.name}` | | {c.meaning} |")
                out += [f"| `{c.name}` | `{v}` | {m} |" for v, m in c.values.items()]
            else:
                extra = " (may be empty)" if c.empty_ok else ""
                out.append(f"| `{c.name}` | text | {c.meaning}{extra} |")
        out.append("")
    out.append(
        f"A tag that does not apply is written `{NA}`; files are comma-separated UTF-8 "
        "without a byte-order mark, with one header line and one entry per line."
    )
    return "\n".join(out) + "\n"
