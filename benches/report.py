#!/usr/bin/env python3
"""Turn criterion's output into docs/performance.md and docs/performance-chart.svg.

Reads target/criterion/**/new/{benchmark.json,estimates.json} (written by
`cargo bench -p resultbudget-benches --bench throughput`), the proxy bench's
target/rb-proxy-bench.json, the 4 KiB/64 KiB pairs of target/rb-chunk-ratio.json
(`chunk-ratio --json`), the targets' ratios in alternating pairs of
target/rb-pairs.json (`cargo bench --bench pairs`), the run environment target/rb-bench-env.json (all
written by benches/run.sh), and the hand-written analysis in
benches/performance-notes.md. Python standard library only; the SVG is drawn
here.

    python3 benches/report.py [--target DIR] [--out FILE.md] [--svg FILE.svg]
"""

import argparse
import glob
import html
import json
import math
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Columns of the table, in order, with a label and a chart colour.
IMPLS = [
    ("rb_pass_64k", "resultbudget pass-through, 64 KiB chunks", "#1f77b4"),
    ("rb_pass_4k", "resultbudget pass-through, 4 KiB chunks", "#6baed6"),
    ("rb_budget_64k", "resultbudget budgeted (64 KiB result)", "#08306b"),
    ("rb_skip", "resultbudget skipping an over-budget tail", "#17becf"),
    ("serde_value_pass", "serde_json Value round trip", "#d62728"),
    ("serde_value_budget", "serde_json Value + truncation walk", "#ff9896"),
    ("serde_ignored", "serde_json IgnoredAny (validate, UTF-8 not checked)", "#ff7f0e"),
    ("simd_dom", "simd-json DOM round trip", "#2ca02c"),
    ("simd_tape", "simd-json validation (stage 1 + 2 into a tape, no DOM)", "#98df8a"),
    ("struson_copy", "struson streaming copy", "#9467bd"),
    ("memcpy", "memcpy", "#7f7f7f"),
]
LABEL = {k: l for k, l, _ in IMPLS}
COLOR = {k: c for k, _, c in IMPLS}

# Inputs, in order, with a description.
INPUTS = [
    ("twitter", "json-benchmark twitter.json (generic `Budget`)"),
    ("citm_catalog", "json-benchmark citm_catalog.json (generic `Budget`)"),
    ("canada", "json-benchmark canada.json (generic `Budget`)"),
    ("mcp_text", "tools/call line, one escape-rich 20 MB text block (`Projector`)"),
    ("mcp_list", "tools/call line, structuredContent list of 300 000 objects (`Projector`)"),
    ("mcp_deep", "tools/call line, 1 000 chains of 200-deep objects (`Projector`)"),
    ("mcp_image", "tools/call line, a 2 MB base64 image block (`Projector`)"),
    ("skip_list", "generic 20 MB list budgeted to 10 items (`Budget`)"),
    ("skip_text", "the 20 MB text line budgeted to 60 KiB of text (`Projector`)"),
    ("skip_code", "as skip_text, on text with only one-character escapes (`\\n`, `\\\"`; non-ASCII raw)"),
]
DESC = dict(INPUTS)

# Results a little over budget, for reference (not in the targets' verdicts).
CUTS = [
    ("cut_text_128k", "the escape-rich text line, 128 KiB of text"),
    ("cut_text_512k", "the same, 512 KiB"),
    ("cut_text_2m", "the same, 2 MiB"),
    ("cut_list_128k", "the structuredContent list, 1 340 items"),
    ("cut_list_512k", "the same, 5 350 items"),
    ("cut_list_2m", "the same, 21 400 items"),
]


def load(target):
    """{(group, function): {"bytes", "ns", "lo", "hi", "mad"}} from criterion's output."""
    res = {}
    for bj in glob.glob(os.path.join(target, "criterion", "**", "new", "benchmark.json"), recursive=True):
        d = os.path.dirname(bj)
        try:
            with open(bj) as f:
                b = json.load(f)
            with open(os.path.join(d, "estimates.json")) as f:
                e = json.load(f)
        except (OSError, ValueError):
            continue
        tp = (b.get("throughput") or {}).get("Bytes")
        if not tp:
            continue
        med = e["median"]
        res[(b["group_id"], b["function_id"])] = {
            "bytes": tp,
            "ns": med["point_estimate"],
            "lo": med["confidence_interval"]["lower_bound"],
            "hi": med["confidence_interval"]["upper_bound"],
            "mad": e["median_abs_dev"]["point_estimate"],
        }
    return res


def mbps(r):
    return r["bytes"] / (r["ns"] / 1e9) / 1e6


def fmt_mbps(v):
    if v is None:
        return "–"
    if v >= 10000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.1f}"


def fmt_ratio(v):
    if v is None:
        return "–"
    return f"{v:.2f}×" if v < 10 else f"{v:.1f}×"


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return ""


def machine():
    model, cores, threads = "", "", ""
    # Family/model/stepping and the caches tell two hosts sold under one name
    # apart (a VM's "AMD EPYC" has been more than one generation here).
    ident, caches = [], []
    for line in sh(["lscpu"]).splitlines():
        k, _, v = line.partition(":")
        v = v.strip()
        if k == "Model name":
            model = v
        elif k == "CPU(s)":
            threads = v
        elif k == "Core(s) per socket":
            cores = v
        elif k in ("CPU family", "Model", "Stepping"):
            ident.append(f"{k.split()[-1].lower()} {v}")
        elif k in ("L2 cache", "L3 cache"):
            caches.append(f"{k.split()[0]} {v}")
    if ident:
        model = f"{model or 'unknown'} ({', '.join(ident)})"
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                # x86 lists "flags"; aarch64 lists "Features" (NEON is "asimd").
                if line.startswith("flags") or line.startswith("Features"):
                    fl = line.split(":", 1)[1].split()
                    names = ("sse2", "sse4_2", "avx2", "avx512f", "avx512bw", "avx512_vbmi2", "asimd")
                    flags = ", ".join(x for x in names if x in fl)
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "model": model or platform.processor() or "unknown",
        "cpus": threads,
        "cores": cores,
        "flags": flags,
        "mem": mem,
        "caches": ", ".join(caches),
        "rustc": sh(["rustc", "--version"]),
        "kernel": platform.release(),
    }


# ---------------------------------------------------------------- ratios

# (key, claim, numerator, denominator, target, which groups)
GENERIC_GROUPS = ["twitter", "citm_catalog", "canada", "mcp_text", "mcp_list", "mcp_deep", "mcp_image"]
RATIOS = [
    ("budget_vs_serde", "budgeting ≥ 20× serde_json's Value round trip (Value + truncation walk + to_vec)",
     "rb_budget_64k", "serde_value_budget", 20.0, GENERIC_GROUPS),
    ("pass_vs_serde", "(for reference) pass-through vs the Value round trip without cuts",
     "rb_pass_64k", "serde_value_pass", None, GENERIC_GROUPS),
    ("budget_vs_ignored", "budgeting ≥ 2× serde_json IgnoredAny",
     "rb_budget_64k", "serde_ignored", 2.0, GENERIC_GROUPS),
    ("pass_vs_ignored", "(for reference) pass-through vs IgnoredAny",
     "rb_pass_64k", "serde_ignored", None, GENERIC_GROUPS),
    ("budget_vs_struson", "budgeting ≥ 10× the streaming peer (struson copy)",
     "rb_budget_64k", "struson_copy", 10.0, GENERIC_GROUPS),
    ("pass_vs_struson", "(for reference) pass-through vs struson copy",
     "rb_pass_64k", "struson_copy", None, GENERIC_GROUPS),
    ("skip_vs_memcpy", "skipping an over-budget tail ≥ 0.3× memcpy",
     "rb_skip", "memcpy", 0.3, ["skip_list", "skip_text", "skip_code"]),
    ("budget_vs_simd_tape", "(for reference) budgeting vs simd-json's validating parse",
     "rb_budget_64k", "simd_tape", None, GENERIC_GROUPS),
    ("skip_vs_simd_tape", "(for reference) skipping vs simd-json's validating parse of the same bytes",
     "rb_skip", "simd_tape", None, ["skip_list", "skip_text", "skip_code"]),
    ("chunk4k_vs_64k", "4 KiB chunks ≥ 0.9× the speed of 64 KiB chunks (pass-through)",
     "rb_pass_4k", "rb_pass_64k", 0.9, GENERIC_GROUPS),
]


def ratio_rows(res):
    rows = []
    for key, claim, num, den, target, groups in RATIOS:
        per = []
        for g in groups:
            a, b = res.get((g, num)), res.get((g, den))
            if a and b:
                per.append((g, mbps(a) / mbps(b)))
        geo = math.exp(sum(math.log(v) for _, v in per) / len(per)) if per else None
        worst = min((v for _, v in per), default=None)
        verdict = "reference" if target is None else verdict_on([v for _, v in per], target)
        rows.append({"key": key, "claim": claim, "per": per, "geo": geo, "worst": worst,
                     "target": target, "verdict": verdict})
    return rows


def verdict_on(values, target):
    """Met only if every input's ratio reaches the target."""
    met = sum(v >= target for v in values)
    if not values:
        return "not measured"
    if met == len(values):
        return "**met**"
    if met:
        return f"**NOT met** (met on {met} of {len(values)} inputs)"
    return "**NOT met**"


# The targets (keys of RATIOS) that the alternating-pair drivers measure too.
PAIRED = ["budget_vs_serde", "budget_vs_ignored", "pass_vs_ignored", "budget_vs_struson", "skip_vs_memcpy",
          "chunk4k_vs_64k"]


def paired_rows(rp, chunk_pairs):
    """The targets' ratios from the alternating-pair drivers: per claim, the
    per-input (median, q1, q3) and a verdict on the medians."""
    per_key = {}
    for r in (rp or {}).get("rows", []):
        per_key.setdefault(r["ratio"], []).append((r["input"], r["median"], r["q1"], r["q3"]))
    for r in (chunk_pairs or {}).get("inputs", []):
        per_key.setdefault("chunk4k_vs_64k", []).append((r["name"], r["median"], r["q1"], r["q3"]))
    rows = []
    for key, claim, _, _, target, _ in RATIOS:
        per = per_key.get(key, [])
        if key not in PAIRED or not per:
            continue
        medians = [m for _, m, _, _ in per]
        verdict = "reference" if target is None else verdict_on(medians, target)
        rows.append({"key": key, "claim": claim, "target": target, "per": per, "worst": min(medians),
                     "verdict": verdict})
    return rows


# ---------------------------------------------------------------- chart

def svg_chart(res, path):
    groups = [g for g, _ in INPUTS if any((g, k) in res for k, _, _ in IMPLS)]
    impls_of = {g: [k for k, _, _ in IMPLS if (g, k) in res] for g in groups}
    bar_h, gap, left, right, top = 11, 14, 150, 90, 56
    width = 1000
    plot_w = width - left - right
    vals = [mbps(r) for r in res.values()]
    if not vals:
        return
    lo_v = 10 ** math.floor(math.log10(max(min(vals), 1e-3)))
    hi_v = 10 ** math.ceil(math.log10(max(vals)))

    def x(v):
        return left + plot_w * (math.log10(v) - math.log10(lo_v)) / (math.log10(hi_v) - math.log10(lo_v))

    legend_rows = math.ceil(len(IMPLS) / 2)
    height = top + sum(len(impls_of[g]) * bar_h + gap for g in groups) + 40 + legend_rows * 16
    out = []
    out.append(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
               f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">')
    out.append(f'<rect width="{width}" height="{height}" fill="white"/>')
    out.append(f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="15" font-weight="bold">'
               'Throughput by input and implementation (MB/s, log scale, median; higher is better)</text>')
    # Grid and axis labels.
    plot_bottom = height - 40 - legend_rows * 16
    e = math.log10(lo_v)
    while e <= math.log10(hi_v) + 1e-9:
        v = 10 ** e
        xx = x(v)
        out.append(f'<line x1="{xx:.1f}" y1="{top - 8}" x2="{xx:.1f}" y2="{plot_bottom}" stroke="#ccc"/>')
        lab = f"{v:,.0f}" if v >= 1 else f"{v:g}"
        out.append(f'<text x="{xx:.1f}" y="{top - 12}" text-anchor="middle" fill="#555">{lab}</text>')
        for m in range(2, 10):
            mv = v * m
            if mv < hi_v:
                out.append(f'<line x1="{x(mv):.1f}" y1="{top - 4}" x2="{x(mv):.1f}" y2="{plot_bottom}" '
                           'stroke="#eee"/>')
        e += 1
    y = top
    for g in groups:
        n = len(impls_of[g])
        out.append(f'<text x="{left - 8}" y="{y + n * bar_h / 2 + 4:.1f}" text-anchor="end" '
                   f'font-weight="bold">{html.escape(g)}</text>')
        for k in impls_of[g]:
            r = res[(g, k)]
            v = mbps(r)
            w = max(x(v) - left, 1)
            title = f"{g} / {LABEL[k]}: {fmt_mbps(v)} MB/s"
            out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h - 2}" fill="{COLOR[k]}">'
                       f'<title>{html.escape(title)}</title></rect>')
            out.append(f'<text x="{left + w + 3:.1f}" y="{y + bar_h - 3}" fill="#333" font-size="9">'
                       f'{fmt_mbps(v)}</text>')
            y += bar_h
        y += gap
        out.append(f'<line x1="{left}" y1="{y - gap / 2:.1f}" x2="{width - right}" y2="{y - gap / 2:.1f}" '
                   'stroke="#999" stroke-dasharray="2,3"/>')
    # Legend.
    ly = plot_bottom + 20
    for i, (k, label, color) in enumerate(IMPLS):
        lx = 20 + (i % 2) * (width / 2)
        yy = ly + (i // 2) * 16
        out.append(f'<rect x="{lx}" y="{yy - 9}" width="12" height="10" fill="{color}"/>')
        out.append(f'<text x="{lx + 18}" y="{yy}">{html.escape(label)} ({k})</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


# ---------------------------------------------------------------- markdown

def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def markdown(res, ratios, proxy, env, mach, svg_rel, notes, pairs=None, paired=None):
    L = []
    L.append("# Performance")
    L.append("")
    L.append("Generated by `benches/report.py` from criterion's output; the analysis at the end is "
             "`benches/performance-notes.md`. Re-run everything with `bash benches/run.sh`.")
    L.append("")
    L.append("## Machine and command")
    L.append("")
    L.append(f"- CPU: {mach['model']} — {mach['cpus']} logical CPUs ({mach['cores']} cores per socket); "
             f"SIMD: {mach['flags']}; " + (f"{mach['caches']}; " if mach.get('caches') else "") +
             f"memory {mach['mem']}; Linux {mach['kernel']}")
    L.append(f"- Compiler: {mach['rustc']}; profile `bench` (opt-level 3, debug=1, no LTO, "
             "no `target-cpu=native`: the engine picks its level at run time on x86_64, "
             "AVX-512 F+BW for string blocks and the block skim where the CPU has it (the rest of the skip loop at AVX2; "
             "the skim's dense windows with VBMI2 too), "
             "else AVX2 (the block skim on dense blocks, where BMI2 is quick), else SSE2; NEON on aarch64)")
    if env:
        L.append(f"- Engine: commit `{env.get('commit', '?')}`")
        L.append(f"- Command: `{env.get('command', '')}`")
        L.append(f"- Run: {env.get('start', '?')} → {env.get('end', '?')}; load average before "
                 f"`{env.get('load_before', '?')}`, after `{env.get('load_after', '?')}`")
        if env.get("others"):
            L.append(f"- Other processes seen using ≥ 25% of a CPU during the run (sampled every 20 s): {env['others']}")
    L.append("- Numbers: the **median** of criterion's samples; MB/s = input bytes / time / 10⁶ "
             "(decimal megabytes), counted on the input for every implementation.")
    L.append("")
    L.append("## Throughput (MB/s)")
    L.append("")
    cols = [k for k, _, _ in IMPLS if any((g, k) in res for g, _ in INPUTS)]
    L.append("| input | size | " + " | ".join(f"`{k}`" for k in cols) + " |")
    L.append("|---|---:|" + "---:|" * len(cols))
    noisy = []
    for g, _ in INPUTS:
        row = [res.get((g, k)) for k in cols]
        present = [r for r in row if r]
        if not present:
            continue
        size = present[0]["bytes"] / 1e6
        cells = []
        for k, r in zip(cols, row):
            if not r:
                cells.append("–")
                continue
            cells.append(fmt_mbps(mbps(r)))
            if r["mad"] / r["ns"] > 0.05:
                noisy.append(f"{g}/{k} (±{100 * r['mad'] / r['ns']:.0f}%)")
        L.append(f"| {g} | {size:.2f} MB | " + " | ".join(cells) + " |")
    L.append("")
    L.append("Inputs:")
    L.append("")
    for g, d in INPUTS:
        if any(k[0] == g for k in res):
            L.append(f"- `{g}`: {d}")
    L.append("")
    L.append("Implementations:")
    L.append("")
    for k, label, _ in IMPLS:
        if k in cols:
            L.append(f"- `{k}`: {label}")
    L.append("")
    if noisy:
        L.append("Measurements whose median absolute deviation exceeds 5% of the median (noisy): "
                 + ", ".join(noisy) + ".")
        L.append("")
    L.append(f"![throughput chart]({svg_rel})")
    L.append("")
    L.append("## The issue's targets")
    L.append("")
    L.append("Ratios of throughput (higher is better for the engine); a target is met only if it "
             "holds on every input. This table divides criterion's medians, each implementation timed "
             "on its own" + ("; the same targets measured in alternating pairs, which a drifting "
                             "machine disturbs less, follow it." if paired else "."))
    L.append("")
    L.append("| claim | target | worst | geo. mean | verdict |")
    L.append("|---|---:|---:|---:|---|")
    for r in ratios:
        t = "–" if r["target"] is None else (f"≥ {r['target']:g}×")
        L.append(f"| {r['claim']} | {t} | {fmt_ratio(r['worst'])} | {fmt_ratio(r['geo'])} | {r['verdict']} |")
    L.append("")
    L.append("Per input:")
    L.append("")
    groups = [g for g, _ in INPUTS if any(g == p[0] for r in ratios for p in r["per"])]
    L.append("| ratio | " + " | ".join(groups) + " |")
    L.append("|---|" + "---:|" * len(groups))
    for r in ratios:
        d = dict(r["per"])
        cells = []
        for g in groups:
            v = d.get(g)
            if v is None:
                cells.append("")
            else:
                mark = "" if r["target"] is None else (" ✓" if v >= r["target"] else " ✗")
                cells.append(fmt_ratio(v) + mark)
        L.append(f"| {r['key']} | " + " | ".join(cells) + " |")
    L.append("")
    if pairs:
        rows = pairs.get("inputs", [])
        L.append("4 KiB against 64 KiB chunks once more, from `benches/src/bin/chunk-ratio.rs` right after "
                 "criterion: one pass-through run in each chunk size, alternately, in one process, for "
                 f"{pairs.get('seconds_per_input', '?')} s per input, so that the machine's drift hits both "
                 "sizes alike. *Median* is the median of the per-pair ratios (quartiles in brackets), "
                 "*best* the ratio of each size's best time.")
        # The copy-alone column, when chunk-ratio measured it (older runs did not).
        copy = bool(rows) and all("copy_median" in r for r in rows)
        if copy:
            L.append("")
            L.append("*memcpy* is the floor under the ratio: the same input copied into one buffer "
                     "(`extend_from_slice`) in the same 64 KiB and 4 KiB pieces, alternately in the same way, "
                     "with no engine. Pass-through copies every byte it keeps, so where the engine's own work "
                     "per byte is small (the base64 image) its ratio cannot beat the copy's.")
        drained = bool(rows) and all("drained_median" in r for r in rows)
        if drained:
            L.append("")
            L.append("Both write into one buffer that grows to the input's size, as a caller collecting a "
                     "whole message does; on a large input that buffer is out of cache, and each 4 KiB piece "
                     "is copied into it at a cost a 64 KiB piece does not pay (the *memcpy* column). "
                     "*Drained* is the engine run as a streaming writer runs it (the proxy, the `Write` "
                     "adapter): each feed's output handed on and the buffer cleared, alternately in the same "
                     "way; median of the per-pair ratios (quartiles), then the ratio of best times. The "
                     "target's verdict stays on the first column.")
        L.append("")
        head = "| input | pairs | median 4 KiB/64 KiB | best 64 KiB MB/s | best 4 KiB MB/s | best 4 KiB/64 KiB |"
        rule = "|---|---:|---:|---:|---:|---:|"
        if copy:
            head += " memcpy median 4 KiB/64 KiB |"
            rule += "---:|"
        if drained:
            head += " drained median 4 KiB/64 KiB | drained best |"
            rule += "---:|---:|"
        L.append(head)
        L.append(rule)
        for r in rows:
            line = (f"| {r['name']} | {r['pairs']:,} | {r['median']:.3f} ({r['q1']:.3f}–{r['q3']:.3f}) | "
                    f"{fmt_mbps(r['best64_mbps'])} | {fmt_mbps(r['best4_mbps'])} | {r['best_ratio']:.3f} |")
            if copy:
                line += f" {r['copy_median']:.3f} ({r['copy_q1']:.3f}–{r['copy_q3']:.3f}) |"
            if drained:
                line += (f" {r['drained_median']:.3f} ({r['drained_q1']:.3f}–{r['drained_q3']:.3f}) |"
                         f" {r['drained_best_ratio']:.3f} |")
            L.append(line)
        L.append("")
    if paired:
        L.append("### The same targets, measured in alternating pairs")
        L.append("")
        L.append("From `benches/benches/pairs.rs` (and `chunk-ratio` for the 4 KiB row), run with criterion: "
                 "each ratio is one run of the engine, then one of the baseline (the order swapped every "
                 "pair), again and again in one process, so that the machine's drift hits both sides "
                 "alike. A cell is the median of the per-pair ratios, quartiles in brackets; the verdict "
                 "is on those medians.")
        L.append("")
        L.append("| claim | target | worst median | verdict |")
        L.append("|---|---:|---:|---|")
        for r in paired:
            target = "–" if r["target"] is None else f"≥ {r['target']:g}×"
            L.append(f"| {r['claim']} | {target} | {fmt_ratio(r['worst'])} | {r['verdict']} |")
        L.append("")
        seen = {g for r in paired for g, *_ in r["per"]}
        pgroups = [g for g, _ in INPUTS if g in seen] + sorted(seen - {g for g, _ in INPUTS})
        L.append("| ratio | " + " | ".join(pgroups) + " |")
        L.append("|---|" + "---:|" * len(pgroups))
        for r in paired:
            d = {g: (m, q1, q3) for g, m, q1, q3 in r["per"]}
            cells = []
            for g in pgroups:
                if g not in d:
                    cells.append("")
                    continue
                m, q1, q3 = d[g]
                mark = "" if r["target"] is None else (" ✓" if m >= r["target"] else " ✗")
                cells.append(f"{fmt_ratio(m)}{mark} ({fmt_ratio(q1)[:-1]}–{fmt_ratio(q3)[:-1]})")
            L.append(f"| {r['key']} | " + " | ".join(cells) + " |")
        L.append("")
    cut_rows = [(g, d) for g, d in CUTS if (g, "rb_budget_64k") in res]
    if cut_rows:
        L.append("## Results a little over budget (reference)")
        L.append("")
        L.append("From the `cut_*` groups of the same criterion run: tools/call results of the sizes a "
                 "gateway sees most, each over the 64 KiB budget, budgeted by the engine (the "
                 "`rb_budget_64k` budget), next to serde_json's truncation walk and `IgnoredAny` on the "
                 "same line. At these sizes the cut's own costs (the kept 64 KiB, the text's marker, "
                 "the record) are a large part of the work. Not part of the targets' verdicts, which "
                 "are on the issue's inputs above; criterion's medians, no pairs.")
        L.append("")
        L.append("| input | size | engine, µs per result | `rb_budget_64k` MB/s | `serde_value_budget` MB/s "
                 "| `serde_ignored` MB/s | engine / truncation walk | engine / IgnoredAny |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for g, d in cut_rows:
            e = res[(g, "rb_budget_64k")]
            w, i = res.get((g, "serde_value_budget")), res.get((g, "serde_ignored"))
            ev = mbps(e)
            L.append(f"| `{g}`: {d} | {e['bytes'] / 1e6:.2f} MB | {e['ns'] / 1e3:.1f} | {fmt_mbps(ev)} | "
                     f"{fmt_mbps(mbps(w) if w else None)} | {fmt_mbps(mbps(i) if i else None)} | "
                     f"{fmt_ratio(ev / mbps(w) if w else None)} | {fmt_ratio(ev / mbps(i) if i else None)} |")
        L.append("")
    L.append("## Proxy")
    L.append("")
    if proxy:
        lat_a, lat_p = proxy["latency_us"]["alone"], proxy["latency_us"]["proxy"]
        # Runs before the plain relay was measured have no "relay" entries.
        lat_r = proxy["latency_us"].get("relay")
        big = proxy["big_bytes"]
        sec = proxy["big_seconds"]
        outb = proxy["big_out_bytes"]
        L.append(f"`benches/benches/proxy.rs` drives the stdio server `rb-bench-server` (this crate's "
                 f"binary) directly, behind a plain relay (`rb-bench-relay`: two threads copying bytes, "
                 f"each read written on at once, no JSON read; the floor under any stdio proxy) and "
                 f"through `{os.path.relpath(proxy['binary'], ROOT) if proxy['binary'].startswith('/') else proxy['binary']} proxy`, "
                 "over pipes, timing with `std::time::Instant`. The peers run side by side and take turns "
                 "(50 round trips, or one big result, each), so that the machine's drift falls on all alike.")
        L.append("")
        L.append(f"Small `tools/call` round trips ({proxy['small_round_trips']} a peer, after 50 warm-up calls; "
                 "a ~140-byte result that passes unchanged):")
        L.append("")
        def lat_row(label, l):
            return f"| {label} | {l['p50']:.1f} µs | {l['p99']:.1f} µs | {l['mean']:.1f} µs |"

        def added_row(label, how, top, base):
            # A difference of two percentiles, each from its own round trips:
            # where the tail is noise (the proxy's p99 below the other row's)
            # it says nothing about the proxy, so none is claimed.
            def cell(key):
                d = top[key] - base[key]
                text = f"{d:.1f} µs" if d >= 0 else "– (noise)"
                return text if key == "mean" else f"**{text}**"
            return f"| **{label}** ({how}) | " + " | ".join(cell(k) for k in ("p50", "p99", "mean")) + " |"

        L.append("| | p50 | p99 | mean |")
        L.append("|---|---:|---:|---:|")
        L.append(lat_row("server alone", lat_a))
        if lat_r:
            L.append(lat_row("behind the plain relay", lat_r))
        L.append(lat_row("through the proxy", lat_p))
        L.append(added_row("added by the proxy", "proxy − server alone", lat_p, lat_a))
        if lat_r:
            L.append(added_row("added by the proxy's own work", "proxy − relay", lat_p, lat_r))
        one = proxy.get("latency_one_cpu_us")
        if one:
            L.append("")
            L.append("The same round trips with the bench and every process it starts on one CPU "
                     "(`sched_setaffinity`): no hop then waits for a wake-up on the other CPU, so what "
                     "is left between the rows is the relay's and the proxy's own work.")
            L.append("")
            L.append("| one CPU | p50 | p99 | mean |")
            L.append("|---|---:|---:|---:|")
            for key, label in (("alone", "server alone"), ("relay", "behind the plain relay"),
                               ("proxy", "through the proxy")):
                L.append(lat_row(label, one[key]))
            L.append(added_row("the proxy's own work", "proxy − relay", one["proxy"], one["relay"]))
        piped = proxy.get("pipelined")
        if piped:
            L.append("")
            L.append(f"{piped['calls']:,} small `tools/call` requests written at once, as a client with many calls "
                     f"in flight writes them, while the answers are read (median of {piped['runs']} runs, the "
                     "peers in turns; from the first write to the last answer):")
            L.append("")
            L.append("| | time | calls/s |")
            L.append("|---|---:|---:|")
            for key, label in (("alone", "server alone"), ("relay", "behind the plain relay"),
                               ("proxy", "through the proxy")):
                t = piped["seconds"][key]
                L.append(f"| {label} | {t:.3f} s | {piped['calls'] / t:,.0f} |")
        L.append("")
        L.append(f"One {big / 1e6:.0f} MB `tools/call` result (one escape-rich text block; median of "
                 f"{proxy['big_runs']} runs, from writing the request to reading the response's newline):")
        L.append("")
        L.append("| | time | MB/s (of the server's line) | bytes to the client |")
        L.append("|---|---:|---:|---:|")
        for key, label in (("alone", "server alone"), ("relay", "behind the plain relay"),
                           ("proxy_default", "proxy, default budget (64 KiB)"),
                           ("proxy_unlimited", "proxy, budgets off (`none`)")):
            if key in sec:
                L.append(f"| {label} | {sec[key]:.3f} s | {big / sec[key] / 1e6:,.0f} | {outb[key]:,} |")
        L.append("")
    else:
        L.append("(not measured: run `bash benches/run.sh`)")
        L.append("")
    if notes:
        L.append(notes.rstrip())
        L.append("")
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default=os.path.join(ROOT, "target"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "performance.md"))
    ap.add_argument("--svg", default=os.path.join(ROOT, "docs", "performance-chart.svg"))
    ap.add_argument("--notes", default=os.path.join(HERE, "performance-notes.md"))
    args = ap.parse_args()
    res = load(args.target)
    if not res:
        sys.exit(f"no criterion results under {args.target}/criterion: run the benches first")
    ratios = ratio_rows(res)
    proxy = read_json(os.path.join(args.target, "rb-proxy-bench.json"))
    pairs = read_json(os.path.join(args.target, "rb-chunk-ratio.json"))
    paired = paired_rows(read_json(os.path.join(args.target, "rb-pairs.json")), pairs)
    env = read_json(os.path.join(args.target, "rb-bench-env.json"))
    notes = ""
    if os.path.exists(args.notes):
        with open(args.notes) as f:
            notes = f.read()
    svg_chart(res, args.svg)
    svg_rel = os.path.relpath(args.svg, os.path.dirname(os.path.abspath(args.out)))
    md = markdown(res, ratios, proxy, env, machine(), svg_rel, notes, pairs, paired)
    with open(args.out, "w") as f:
        f.write(md)
    # A short summary on stdout.
    for r in ratios:
        print(f"{r['key']:20} worst {fmt_ratio(r['worst']):>8}  geo {fmt_ratio(r['geo']):>8}  {r['verdict']}")
    for r in paired:
        print(f"paired {r['key']:13} worst median {fmt_ratio(r['worst']):>8}  {r['verdict']}")
    print(f"wrote {args.out} and {args.svg}")


if __name__ == "__main__":
    main()
