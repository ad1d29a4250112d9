"""The `search` settings: how many hits, how much context, how candidates are fetched and ranked.

Kept free of other mcp_analysis imports (pydantic only), like watch/settings.py: config.py
attaches `SearchSettings` as the `search` section.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class SearchSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    limit: int = Field(5, ge=1, le=100, description="Default number of hits of the search tool.")
    sandbox_limit: int = Field(10, ge=1, le=100, description="Default limit of search() inside the sandbox.")
    max_limit: int = Field(50, ge=1, le=500, description="Largest limit a caller may ask for.")
    max_context_chars: int = Field(
        5000, ge=0, le=100_000, description="Each hit is grown with its section up to this size."
    )
    context_chars: int = Field(
        900, ge=100, le=100_000, description="Characters per hit's passage a search result shows by default (average)."
    )
    max_concurrent: int = Field(4, ge=1, le=64, description="Concurrent LanceDB searches (more collapse).")
    vector_index_min_rows: int = Field(
        50_000, ge=0, description="Build an HNSW vector index once there are this many chunks (0 = never)."
    )
    vector_index_max_segments: int = Field(
        4,
        ge=0,
        description="Past this many vector index segments (one per optimize after an add), an optimize merges "
        "those after the first into one, leaving two (0 = never; bench/search.py --more-adds).",
    )
    ann_ef: int = Field(
        1024,
        ge=10,
        le=4096,
        description="HNSW search breadth when a vector index exists (at least candidates x ann_refine_factor; "
        "bench/search.py chose it by recall@10 and p50 at a million chunks); a vector leg under a filtered view's "
        "prefilter uses it times the share of chunks the view passes (bench/prefilter.py).",
    )
    ann_refine_factor: int = Field(4, ge=1, le=100, description="Re-rank this many times more ANN candidates exactly.")
    flat_search_max_rows: int = Field(
        2000,
        ge=0,
        description="A filtered view passing at most this many chunks has its vector leg scan exactly those "
        "(recall 1; faster than the index's prefiltered walk below this, bench/prefilter.py --strategies; 0 = never).",
    )
    scanner_min_chunks: int = Field(
        100_000,
        ge=0,
        description="From this many chunks on, both legs run through Lance's own scanner, which takes a filtered "
        "view as its chunk rows (found once per view and version) instead of planning and looking up its document "
        "ids in each leg (bench/view_split.py), and a search's item windows are read by offset "
        "(store/item_offsets.py); below, through LanceDB as before, never importing pylance (its "
        "import added 21 MB in bench/view_split.py --allowlist). 0 = always.",
    )
    post_filter_min_share: float = Field(
        0.5,
        ge=0.05,
        le=2,
        description="A filtered view passing at least this share of the documents and of the chunks runs both legs "
        "unfiltered for 1.5 x candidates / (the chunks' share) rows and keeps its own (cheaper than a prefilter of "
        "that many ids; bench/prefilter.py --strategies); above 1 = never. At least 0.05: below, the unfiltered "
        "fetch would grow without bound.",
    )
    sampled_vector_min_chunks: int = Field(
        500_000,
        ge=0,
        description="From this many chunks on, a filtered view passing at least 5 % of them and not post-filtered "
        "(post_filter_min_share) has its vector leg walk the index unfiltered (for 1.5 x candidates / share rows, "
        "at least twice ann_ef) by the index's quantized distances and rank the view's rows among them exactly, "
        "instead of walking under the view's prefilter, whose cost grows with the table (bench/view_sample.py: "
        "at a million chunks 24-33 % less time for views passing 5-25 %, recall@10 0.970-0.983; at 100,000 no "
        "gain); only where the legs run through Lance's scanner (scanner_min_chunks). 0 = at any size.",
    )
    mode: Literal["hybrid", "keyword"] = Field(
        "hybrid", description="hybrid = vectors + full text; keyword = full text only (no embedder needed)."
    )
    rerank: bool = Field(
        True,
        description="Re-rank hybrid candidates by vector, keyword and title scores and show each passage where the "
        "best-scoring hits are; false = reciprocal-rank fusion and keyword-placed passages only.",
    )
    candidates: int = Field(
        50,
        ge=5,
        le=1000,
        description="Chunks each leg (vector, full text) of a search fetches for ranking; the candidates are "
        "their union (bench/passages.py chose 50).",
    )
    weight_vector: float = Field(0.5, ge=0, le=10, description="Re-ranking: weight of the chunk's vector's cosine.")
    weight_keyword: float = Field(
        0.25,
        ge=0,
        le=10,
        description="Re-ranking: weight of the full-text score (half relative to the best candidate's, half "
        "saturating at 3x the candidates' median; bench/rank_sweep.py chose 0.25).",
    )
    weight_title: float = Field(0.2, ge=0, le=10, description="Re-ranking: weight of the title the question names.")
    weight_distinct: float = Field(
        0.06,
        ge=0,
        le=10,
        description="Re-ranking: weight of the question's words scored (BM25) over the best candidates' text, "
        "headings, title and file name with those candidates' own statistics (what tells near-duplicates apart; "
        "bench/rank_sweep.py chose 0.06).",
    )
    page_title: bool = Field(
        True,
        description="Re-ranking: the title signal and the distinctive terms read a document's page title (an HTML "
        "page's <title>, which names its manual or site) where ingest recorded one, in place of its first heading "
        "(bench/rank_sweep.py: on the paraphrased tuning sets 4 more first hits, 2 more right documents in the top "
        "5 and 3 more answers shown, none lost; false = the first heading).",
    )
    nearest_place: int = Field(
        3,
        ge=0,
        le=100,
        description="Re-ranking: the chunk nearest the question in meaning (the vector leg's best) takes at least "
        "this place among the hits unless it stands there or before (search.nearest_by_chunk false: unless a "
        "chunk of its document does; 0 = off; "
        "bench/rank_sweep.py: 3 ranks three questions' documents higher on the tuning sets, one into the top 5, and "
        "loses none; 2 loses answers).",
    )
    nearest_by_chunk: bool = Field(
        True,
        description="Re-ranking: the nearest chunk takes its place (search.nearest_place) unless it stands there "
        "itself, also when another chunk of its document stands before it (bench/rank_sweep.py: 3 more answers "
        "shown on the 14 tuning sets, no first hit or top-5 document lost; false = unless a chunk of its "
        "document stands there, the rule before).",
    )
    weight_version: float = Field(
        0.75,
        ge=0,
        le=1,
        description="Re-ranking: share of its title signal a title loses when it carries a version but is no "
        'release of the one the question names after a title\'s name ("GPL 2": GPL-3; 0 turns it off; '
        "bench/rank_sweep.py and tests/search/test_passages.py chose 0.75).",
    )
    weight_passage: float = Field(
        0.0,
        ge=0,
        le=10,
        description="Re-ranking, second stage: weight of the question's words over a leading document's own "
        "chunks, which re-orders that document's chunks among its places (0, the default, turns it off: 0.5 won "
        "three answers on the tuning sets in bench/rank_sweep.py but lost one on each held-out split).",
    )
    passage_candidates: int = Field(
        0,
        ge=0,
        le=100,
        description="Re-ranking: chunks each leg fetches again within the first two documents, so the second stage "
        "can choose a clause neither leg's search of the whole knowledge base fetched; only with that stage on "
        "(search.weight_passage above 0). 0 = no such fetch, the default: at 16, the best size bench/rank_sweep.py "
        "found, bench/passages.py measured search p50 x1.26 for one answer more in the 388 tuning questions.",
    )
    duplicate_overlap: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Re-ranking: a hit sharing this share of its word 5-grams with a better hit of another "
        "document comes after the distinct ones (1 = never).",
    )
    bare_heading_words: int = Field(
        3,
        ge=0,
        le=50,
        description="A chunk that is a heading plus at most this many words is never a hit on its own: it joins "
        "the chunk after it in the section it titles.",
    )

    @field_validator("vector_index_max_segments")
    @classmethod
    def _two_or_more(cls, value: int) -> int:
        """A merge keeps the first segment and folds the others into one, so two always remain:
        a bound of 1 could never hold (it would merge on every optimize for nothing)."""
        if value == 1:
            raise ValueError("must be 0 (never merge) or at least 2: a merge leaves the first segment and one more")
        return value
