"""The attention decode family's YAML fields: shape, declared arithmetic, value ranges, cases."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from kcontract.contract.model import Strict


class Shape(Strict):
    """Heads and head dim; query head h reads key head h // (q_heads // kv_heads)."""

    head_dim: int = Field(gt=0, le=1024)
    q_heads: int = Field(gt=0, le=256)
    kv_heads: int = Field(gt=0, le=256)

    @model_validator(mode="after")
    def _group(self) -> "Shape":
        if self.q_heads % self.kv_heads:
            raise ValueError(f"q_heads a multiple of kv_heads, given: {self.q_heads} and {self.kv_heads}")
        if self.q_heads // self.kv_heads > 16:
            raise ValueError(f"a query-to-key-head ratio of at most 16, given: {self.q_heads // self.kv_heads}")
        return self

    @property
    def group(self) -> int:
        """Query heads per key head."""
        return self.q_heads // self.kv_heads


ROW_CHUNK = 2**30  # a chunk no row of the ABI's int32 positions crosses: the whole row is one chunk


class Arithmetic(Strict):
    """The kernel's declared arithmetic: what the rigorous range allows for."""

    chunk: int = Field(default=256, gt=0)  # keys per partial, at absolute positions; `row`: no split
    # after_sum: o = (sum p v) / l, one division per output; per_key: softmax first, each p / l rounded (the
    # division kind `div`), then o = sum (p / l) v with no division after (torch's unfused math attention)
    normalise: Literal["after_sum", "per_key"] = "after_sum"
    # score: scale * (q . k) or a prescaled q; sqrt_split: q and k each times fp32(sqrt(scale)) before the dot
    score_scale: Literal["score", "sqrt_split"] = "score"
    score: Literal["fp32", "mma_bf16"] = "fp32"  # IEEE fp32 dot products, or tensor-core bf16 k-steps of 16
    # replay: the decode kernel's k-step grouping of head dims, replayed bit for bit; replay_natural: dims
    # 16 s .. 16 s + 15 in step s = 0 .. D/16 - 1 (tensorcore.kstep_dims)
    score_order: Literal["any", "replay", "replay_natural"] = "any"
    # replayed orders (replay.py): split_lanes (lane sums, the kernel's exported key groups and merge runs),
    # split_chain (one chain per chunk), split_mma (p times V in tensor-core k-steps), online_mma (an online merge)
    sum_order: Literal["any", "split_lanes", "split_chain", "split_mma", "online_mma"] = "any"
    pv: Literal["fp32", "mma_bf16"] | None = None  # p times V: IEEE fp32 sums or tensor-core k-steps of 16 keys
    exp: Literal["expf", "exp2f", "ex2.approx", "__expf"] = "expf"
    prob_round: Literal["none", "bf16", "bf16_numerator"] = "none"  # where p is rounded to bf16
    div: Literal["ieee", "rcp_rn", "rcp_approx", "div_full", "fdividef"] = "ieee"
    rescales_per_key: int = Field(default=0, ge=0)  # online rescales a weight may see inside its chunk
    out: Literal["bf16", "fp16", "fp32"] = "bf16"
    partials: Literal["checked", "hidden"] = "checked"  # part_m/l/o checked at fp32 resolution, or not written
    merge_chains: int = Field(default=1, ge=1, le=8)  # the online merge's chains: chunk c in chain c % n (docs 8.1)

    @field_validator("chunk", mode="before")
    @classmethod
    def _row(cls, value):
        """`chunk: row`: the whole row is one chunk (a kernel that does not split rows)."""
        return ROW_CHUNK if value == "row" else value

    @property
    def keeps_integer_scores(self) -> bool:
        """Whether integer q and k at a scale exact in fp32 give exact scores (not when sqrt(scale) rounds)."""
        return self.score_scale != "sqrt_split"

    @property
    def replays_scores(self) -> bool:
        """Whether the kernel's scores are replayed bit for bit (E_j = 0)."""
        return self.score_order in ("replay", "replay_natural")

    @property
    def score_grouping(self) -> str:
        """The replayed scores' k-step grouping of head dims (tensorcore.kstep_dims)."""
        return "natural" if self.score_order == "replay_natural" else "decode"

    @property
    def merges_online(self) -> bool:
        """Whether the declared order merges chunks online (two roundings per chunk for L and O)."""
        return self.sum_order == "online_mma"

    @model_validator(mode="after")
    def _replay_needs_mma(self) -> "Arithmetic":
        if self.replays_scores and self.score != "mma_bf16":
            raise ValueError(f"score_order: {self.score_order} replays tensor-core k-steps: it needs score: mma_bf16")
        rounds = ("none", "bf16") if self.sum_order in ("split_chain", "split_mma", "online_mma") else ("none",)
        scores, chunk = ("replay_natural", 64) if self.merges_online else ("replay", 256)
        plain = (self.score_order == scores and self.exp == "expf" and self.prob_round in rounds and
                 self.div == "ieee" and self.out == "bf16" and self.chunk == chunk and self.rescales_per_key == 0)
        need = "mma_bf16" if self.sum_order in ("split_mma", "online_mma") else "fp32"
        if self.pv is None:  # unsaid: what the declared order sums with, else fp32
            self.pv = need
        if self.sum_order != "any" and self.pv != need:
            where = "on tensor cores" if need == "mma_bf16" else "in fp32"
            raise ValueError(f"sum_order: {self.sum_order} sums p times V {where}: it needs pv: {need}")
        if self.pv == "mma_bf16" and self.chunk % 16:
            raise ValueError("pv: mma_bf16 sums a chunk in k-steps of 16 keys: it needs a chunk that is a multiple "
                             f"of 16, given: chunk: {self.chunk}")
        self._per_key()
        if self.score_scale == "sqrt_split" and self.score != "fp32":
            raise ValueError("score_scale: sqrt_split rounds q and k to fp32 before an fp32 dot product: it needs "
                             f"score: fp32, given: score: {self.score}")
        if self.sum_order != "any" and not plain:
            raise ValueError(f"sum_order: {self.sum_order} replays a kernel's own order: it needs score_order: "
                             f"{scores}, exp: expf, prob_round: {' or '.join(rounds)}, div: ieee, out: bf16, "
                             f"chunk: {chunk}, no rescales")
        if self.merges_online and self.partials != "hidden":
            raise ValueError(f"sum_order: {self.sum_order} merges online and writes no partials: it needs "
                             "partials: hidden")
        if self.merge_chains > 1 and not self.merges_online:
            raise ValueError(f"merge_chains: {self.merge_chains} splits an online merge into chains: it needs "
                             f"sum_order: online_mma, given: sum_order: {self.sum_order}")
        return self

    def _per_key(self) -> None:
        """normalise: per_key is a softmax over the whole row, then p / l per key, then P.V in fp32."""
        if self.normalise != "per_key":
            return
        if "chunk" not in self.model_fields_set:
            self.chunk = ROW_CHUNK
        missing = [text for bad, text in (
            (self.chunk != ROW_CHUNK, f"the whole row as one chunk (chunk: row), given: chunk: {self.chunk}"),
            (self.sum_order != "any", f"sum_order: any, given: {self.sum_order}"),
            (self.pv != "fp32", f"pv: fp32 (tensor-core P.V of normalised p is not modelled), given: pv: {self.pv}"),
            (self.prob_round != "none", f"prob_round: none, given: {self.prob_round}"),
            (self.rescales_per_key != 0, f"no online rescales, given: rescales_per_key: {self.rescales_per_key}"),
            (self.partials != "hidden", "partials: hidden (it writes no partials)")) if bad]
        if missing:
            raise ValueError("normalise: per_key softmaxes the whole row before P.V: it needs " + "; ".join(missing))


class Values(Strict):
    """Realistic value ranges for gate 1 (RMS per row and head)."""

    q_rms: tuple[float, float] = (0.95, 1.05)
    k_rms: tuple[float, float] = (0.06, 0.13)
    v_rms: float = Field(default=1.0, gt=0)
    v_mean: float = Field(default=1.0, ge=0)  # per-column mean magnitude on mean-shifted slots
    peaked_keys: int = Field(default=4, ge=0)  # keys per row raised by peak_nats
    peak_nats: float = Field(default=6.0, ge=0)


MAX_ROWS = 2**31 - 1  # int32 positions: a cache of 2^31 rows or more is refused


class Cache(Strict):
    """A linear cache (no window) of `length` rows, or a ring of `ring` rows behind a `window`."""

    kind: Literal["linear", "ring"]
    length: int | None = Field(default=None, gt=0, le=MAX_ROWS)
    window: int | None = Field(default=None, gt=0, le=MAX_ROWS)
    ring: int | None = Field(default=None, gt=0, le=MAX_ROWS)

    @model_validator(mode="after")
    def _shape(self) -> "Cache":
        if self.kind == "linear":
            if self.length is None or self.window is not None or self.ring is not None:
                raise ValueError("a linear cache takes `length` only")
        else:
            if self.window is None or self.ring is None or self.length is not None:
                raise ValueError("a ring cache takes `window` and `ring`")
            if self.ring < self.window:
                raise ValueError(f"ring >= window, given: ring {self.ring} < window {self.window}")
        return self

    @property
    def win(self) -> int:
        """The ABI's window scalar: 0 means no window."""
        return 0 if self.kind == "linear" else int(self.window)

    @property
    def rows(self) -> int:
        """Cache rows per slot (the ABI's ring)."""
        return int(self.length if self.kind == "linear" else self.ring)


class Case(Strict):
    """Rows (query positions) over one cache layout; each row reads its own cache slot."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    cache: Cache
    rows: list[int] = Field(min_length=1, max_length=1024)
    streams: int | None = Field(default=None, ge=1, le=64)  # rows share this many sequences (linear caches)

    @model_validator(mode="after")
    def _positions(self) -> "Case":
        for pos in self.rows:
            if pos < 0 or pos > MAX_ROWS:
                raise ValueError(f"row positions in [0, 2^31 - 1], given: {pos}")
            if self.cache.kind == "linear" and pos >= self.cache.rows:
                raise ValueError(f"row positions below the cache length {self.cache.rows}, given: {pos}")
        if self.streams is not None and self.cache.kind != "linear":
            raise ValueError("streams only over a linear cache (a ring overwrites what other rows read), "
                             f"given: a {self.cache.kind} cache")
        return self


class Stress(Strict):
    """Gate 3's merge-stress inputs."""

    chunks: int = Field(default=130, ge=2, le=4096)  # chunks in the longest stress row
    gap_nats: float = Field(default=40.0, gt=0)  # spread of the per-chunk maxima


class Mirror(Strict):
    """Gate 4's integer mirrors."""

    max_keys: int = Field(default=1024, gt=0, le=65536)  # keys per mirror row: sums of at most 65,536 x 256 = 2^24


class DecodeSpec(Strict):
    """Everything an attention decode entry declares beyond the generic fields."""

    shape: Shape
    arithmetic: Arithmetic = Arithmetic()
    values: Values = Values()
    cases: list[Case] = Field(min_length=1)
    stress: Stress = Stress()
    mirror: Mirror = Mirror()
    scale: float | None = Field(default=None, ge=2.0**-60, le=2.0**10)  # default fp32(1/sqrt(head_dim))

    @model_validator(mode="after")
    def _decode_order(self) -> "DecodeSpec":
        if self.arithmetic.merges_online:
            raise ValueError(f"sum_order: {self.arithmetic.sum_order} is the fused prompt kernel's order: a decode "
                             "entry cannot declare it (family attention.prompt with abi: fused)")
        return self

    @model_validator(mode="after")
    def _unique_cases(self) -> "DecodeSpec":
        seen: set[str] = set()
        for case in self.cases:
            if case.name in seen:
                raise ValueError(f"case names unique within the entry, given twice: {case.name!r}")
            seen.add(case.name)
        return self
