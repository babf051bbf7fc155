"""Why a graph cache missed: the components of an FX graph cache or AOTAutograd cache key
(``compiles/<id>.cache.json``, docs/trace-format.md) compared with another lookup's — an earlier
compile of the same trace, or the same compile in another trace — and each difference named:
``config: max_autotune False → True``, ``graph: the FX graph differs``, ``inputs: arg0 shape
[8, 16] → [4, 16]``, ``versions: torch_version differs``. No torch."""

from __future__ import annotations

import re
from typing import Any, Iterable

CLOSEST_WINDOW = 32  # a miss is compared with at most this many earlier lookups (the latest)
MAX_VALUE = 240  # characters of a component's value kept in a trace
_LINE = re.compile(r"\[(?P<hash>[0-9a-z]+)\] (?P<name>[^:\n]+?): (?P<value>.*)", re.S)
_TENSOR_FIELD = re.compile(r"(\w+)=(torch\.Size\(\[[^\]]*\]\)|\([^)]*\)|[^,()]+)")
_VERSIONS = ("torch_version", "system_info", "triton_version")


def parse_components(lines: Iterable[str]) -> list[dict[str, str]]:
    """``[hash] name: value`` strings as ``{name, hash, value}`` (value cut to MAX_VALUE, made
    printable); a string that is not one is left out."""
    out: list[dict[str, str]] = []
    if not isinstance(lines, (list, tuple)):  # a log's "components" of another type
        return out
    for line in lines:
        m = _LINE.match(str(line))
        if m is None:
            continue
        whole = m["value"]
        value = whole[:MAX_VALUE]
        if not value.replace("\n", "").isprintable():
            value = "".join(ch if ch.isprintable() or ch == "\n" else "?" for ch in value)
        out.append({"name": m["name"].strip(), "hash": m["hash"],
                    "value": value if len(whole) <= MAX_VALUE else value + "…"})
    return out


def graph_kind(components: list[dict[str, str]]) -> str | None:
    """forward, backward or inference, from an FX graph cache key's ``fx_kwargs``."""
    values = {c["name"]: c["value"] for c in components}
    if values.get("fx_kwargs[is_backward]") == "True":
        return "backward"
    if values.get("fx_kwargs[is_inference]") == "True":
        return "inference"
    if "fx_kwargs[is_backward]" in values:
        return "forward"
    return None


def _part(name: str) -> tuple[str, str]:
    """(what the component is about, its short name): config, graph, inputs, options, versions
    or other."""
    inner = name[name.find("[") + 1:-1] if name.endswith("]") and "[" in name else name
    if name.startswith(("inductor_config[", "aot_config", "fx_config")):
        return "config", inner
    if name in ("gm", "graph") or name.startswith("gm"):
        return "graph", name
    if name.startswith("example_inputs"):
        return "inputs", f"arg{inner}" if inner.isdigit() else inner
    if name.startswith(_VERSIONS):
        return "versions", name
    if name.startswith("fx_kwargs["):
        return "options", inner
    return "other", name


def _tensor_fields(value: str) -> dict[str, str] | None:
    """A TensorMetadata value's fields; a value cut at MAX_VALUE (ending in ``…``) loses the
    field the cut fell in and every one after it: unknown, not different."""
    if not value.startswith("TensorMetadata("):
        return None
    cut = value.endswith("…")
    found = _TENSOR_FIELD.findall(value[len("TensorMetadata("):].removesuffix("…"))
    fields = {k: v.strip() for k, v in (found[:-1] if cut else found)}
    if "shape" in fields:
        fields["shape"] = fields["shape"].removeprefix("torch.Size(").removesuffix(")")
    return fields


def _one_line(value: Any) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= 60 else text[:59] + "…"


def describe(name: str, a: str | None, b: str | None) -> dict[str, str]:
    """One differing component: ``{part, name, text}``; ``a``/``b`` its values (None: absent)."""
    part, short = _part(name)
    if a is None or b is None:
        text = f"{part}: {short} only in the {'later' if a is None else 'earlier'} key"
    elif part == "graph":
        text = "graph: the FX graph differs"
    elif part == "versions":
        text = f"versions: {short} differs"
    elif part == "inputs" and _tensor_fields(a) is not None and _tensor_fields(b) is not None:
        fa, fb = _tensor_fields(a) or {}, _tensor_fields(b) or {}
        changed = [f"{k} {fa[k]} → {fb[k]}" for k in fa if k in fb and fa[k] != fb[k]]
        text = f"inputs: {short} " + ("; ".join(changed) if changed else
                                      "metadata differs (past what the trace kept of it)")
    else:
        text = f"{part}: {short} {_one_line(a)} → {_one_line(b)}"
    return {"part": part, "name": short, "text": text}


def _input_label(value: str) -> str:
    """An input as ``float32 [1, 2, 5, 16]`` (a tensor) or its value cut to one line."""
    fields = _tensor_fields(value)
    if fields and "shape" in fields:
        return f"{fields.get('dtype', '?').removeprefix('torch.')} {fields['shape']}"
    return _one_line(value)


def _tally(labels: list[str]) -> str:
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    shown = sorted(counts.items(), key=lambda kv: -kv[1])
    text = ", ".join(f"{n}× {label}" if n > 1 else label for label, n in shown[:4])
    return text + (f", {len(shown) - 4} more" if len(shown) > 4 else "")


def _inputs_regrouped(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, str]:
    """Two keys whose graphs take a different number of inputs: positions do not pair up (a
    decode step's graph takes the KV cache as inputs the prefill's did not: input 4 is the
    rotary frequencies in one, a cache tensor in the other), so the inputs are compared as
    bags: how many, and the ones only one side has."""
    la = [_input_label(str(c.get("value", ""))) for c in a]
    lb = [_input_label(str(c.get("value", ""))) for c in b]
    rest = list(la)
    only_b = []
    for label in lb:
        if label in rest:
            rest.remove(label)
        else:
            only_b.append(label)
    text = (f"inputs: {len(la)} → {len(lb)} inputs (the graph takes other inputs: not "
            "compared by position)")
    if only_b:
        text += f"; only in the later key: {_tally(only_b)}"
    if rest:
        text += f"; only in the earlier key: {_tally(rest)}"
    return {"part": "inputs", "name": "inputs", "text": text}


def differences(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The components whose hash differs between two keys (``a`` earlier, ``b`` later), graph
    first, then config, inputs, options, versions, other. Inputs are compared position by
    position only where both graphs take as many (:func:`_inputs_regrouped`)."""
    ha = {c["name"]: c for c in a}
    hb = {c["name"]: c for c in b}
    ia = [c for n, c in ha.items() if n.startswith("example_inputs")]
    ib = [c for n, c in hb.items() if n.startswith("example_inputs")]
    regroup = len(ia) != len(ib)
    out = [_inputs_regrouped(ia, ib)] if regroup else []
    for name in dict.fromkeys([*ha, *hb]):
        ca, cb = ha.get(name), hb.get(name)
        if ca and cb and ca.get("hash") == cb.get("hash"):
            continue
        if regroup and name.startswith("example_inputs"):
            continue
        out.append(describe(name, ca.get("value") if ca else None,
                            cb.get("value") if cb else None))
    order = ("graph", "config", "inputs", "options", "versions", "other")
    return sorted(out, key=lambda d: order.index(d["part"]))


def compare(earlier: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """Two lookups of one cache: ``{same_key, reasons: [text], components_known}``."""
    same = bool(earlier.get("key")) and earlier.get("key") == later.get("key")
    ca, cb = earlier.get("components") or [], later.get("components") or []
    known = bool(ca and cb)
    reasons = [] if same or not known else [d["text"] for d in differences(ca, cb)]
    if not same and not known:
        reasons = ["the keys differ; torch logged no components for "
                   + ("either" if not ca and not cb else "one") + " of them"]
    return {"same_key": same, "reasons": reasons, "components_known": known}


def _frame(compile_id: Any) -> str | None:
    """The frame of a compile id: ``0/1`` and ``0/1_2`` -> ``0``, ``!3/0/1`` -> ``!3/0``."""
    text = str(compile_id or "")
    return text.rsplit("/", 1)[0] if "/" in text else None


def _graph_of(lookup: dict[str, Any]) -> list[tuple[Any, Any]] | None:
    """The FX graph part of a lookup's key (its components' names and hashes); None when torch
    logged no components."""
    comps = lookup.get("components") or []
    return sorted((c.get("name"), c.get("hash")) for c in comps
                  if _part(str(c.get("name")))[0] == "graph") if comps else None


def _closest(lookup: dict[str, Any], same: list[dict[str, Any]],
             mine: list[dict[str, Any]], graphs: dict[int, Any]) -> dict[str, Any] | None:
    """The earlier lookup of the same cache whose key has the fewest differing components
    (among the latest CLOSEST_WINDOW: a trace of hundreds of recompiles stays quick to read):
    one of the same frame (``mine``: a recompile), else one of another frame (``same``: the
    earlier lookups of this cache) whose FX graph is this one's — another function's graph
    explains nothing ("the FX graph differs" of every new function's first compile was no
    reason for its miss). ``graphs``: each lookup's :func:`_graph_of`, by ``id``."""
    if not mine and graphs[id(lookup)] is not None:
        mine = [e for e in same[-CLOSEST_WINDOW:] if graphs[id(e)] == graphs[id(lookup)]]
    if not mine:
        return None
    return min(reversed(mine[-CLOSEST_WINDOW:]), key=lambda e: len(differences(
        e.get("components") or [], lookup.get("components") or [])))


def explain(lookups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lookups of one trace in order, each with ``miss_reason`` (a miss: the components
    that differ from the closest earlier lookup of that cache in the trace, named; or why
    nothing earlier explains it) and ``compared_with`` (that lookup's compile id)."""
    out: list[dict[str, Any]] = []
    by_cache: dict[tuple[Any, Any], list[dict[str, Any]]] = {}  # earlier lookups, grouped once
    by_frame: dict[tuple[Any, Any, Any], list[dict[str, Any]]] = {}
    graphs = {id(lk): _graph_of(lk) for lk in lookups}
    for lk in lookups:
        entry = {k: v for k, v in lk.items() if k != "components"}
        cache = (lk.get("cache"), lk.get("graph_kind", ""))
        frame = (*cache, _frame(lk.get("compile_id")))
        if lk.get("result") == "miss":
            prev = _closest(lk, by_cache.get(cache, []), by_frame.get(frame, []), graphs)
            if prev is None:
                entry["miss_reason"] = ["no earlier lookup of this cache for this graph in the "
                                        "trace: the cache held no entry for this key (a cold "
                                        "or unshared cache directory, or a first run)"]
                entry["compared_with"] = None
            else:
                entry["miss_reason"] = compare(prev, lk)["reasons"] or [
                    "the key equals an earlier one's: that entry was not saved or not usable"]
                entry["compared_with"] = prev.get("compile_id")
        elif lk.get("result") == "bypass":
            entry["miss_reason"] = [f"bypassed: {lk.get('bypass_reason') or 'no reason given'}"]
        out.append(entry)
        by_cache.setdefault(cache, []).append(lk)
        by_frame.setdefault(frame, []).append(lk)
    return out


def across(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Lookups of trace A and trace B matched by compile id, cache and order: per pair
    ``{compile_id, cache, graph_kind, result: {a, b}, same_key, reasons}``."""
    def index(lookups: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
        seen: dict[tuple[Any, ...], int] = {}
        out = {}
        for lk in lookups:
            base = (lk.get("compile_id"), lk.get("cache"), lk.get("graph_kind", ""))
            seen[base] = seen.get(base, 0) + 1
            out[(*base, seen[base])] = lk
        return out

    ia, ib = index(a), index(b)
    pairs = []
    for k in dict.fromkeys([*ia, *ib]):
        la, lb = ia.get(k), ib.get(k)
        row: dict[str, Any] = {"compile_id": k[0], "cache": k[1], "graph_kind": k[2] or None,
                               "result": {"a": la and la.get("result"),
                                          "b": lb and lb.get("result")}}
        if la and lb:
            row.update({kk: v for kk, v in compare(la, lb).items() if kk != "components_known"})
            if row["same_key"] and lb.get("result") == "miss":
                row["reasons"] = ["the same key as in A: A's entry was not saved, not shared "
                                  "(another cache directory) or not usable"]
        else:
            row.update({"same_key": None, "reasons": [f"only in {'A' if la else 'B'}"]})
        pairs.append(row)
    return pairs


def finding_lines(pairs: list[dict[str, Any]]) -> list[str]:
    """One line per pair of lookups (:func:`across`) whose keys differ or whose results do:
    ``fx_graph cache (0/0 forward): A hit, B miss — config: max_autotune False → True``."""
    out = []
    for p in pairs:
        res = p["result"]
        if p.get("same_key") and res["a"] == res["b"]:
            continue
        kind = f" {p['graph_kind']}" if p.get("graph_kind") else ""
        out.append(f"{p['cache']} cache ({p['compile_id']}{kind}): A {res['a'] or '–'}, "
                   f"B {res['b'] or '–'}" + (" — " + "; ".join(p["reasons"][:6])
                                            if p.get("reasons") else ""))
    return out
