"""What the tests of tests/deploy share: where things are, the metric
catalog, and the metric references of PromQL expressions.

The tests run under Debian's /usr/bin/python3 (with python3-yaml), as ctest
starts them (tests/CMakeLists.txt), which sets:
  HOURGLASS_SOURCE_DIR   the repository
  HOURGLASS_BUILD_DIR    the configured and built tree (install tests)
  HOURGLASSD             the hourglassd binary
  HOURGLASS              the hourglass CLI
  HOURGLASS_PROMTOOL     promtool (deploy/setup.sh installs it)
  HOURGLASS_SYSTEMD_ANALYZE, HOURGLASS_SYSTEMD_SYSUSERS   systemd's tools
"""

import os
import re
import subprocess

import yaml


def env(name):
    """The value of environment variable `name`; fails if it is unset."""
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run this test through ctest")
    return value


def source_path(*parts):
    return os.path.join(env("HOURGLASS_SOURCE_DIR"), *parts)


def read_text(*parts):
    with open(source_path(*parts), encoding="utf-8") as f:
        return f.read()


def load_yaml(*parts):
    with open(source_path(*parts), encoding="utf-8") as f:
        return yaml.safe_load(f)


def load_yaml_documents(*parts):
    with open(source_path(*parts), encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


# --- hourglassd's flags -------------------------------------------------------

_HELP_FLAG = re.compile(r"^    --(\w+) \(.*?\);\s+default: (.*?);$", re.S | re.M)


def hourglassd_flags():
    """{name: default as --help prints it} for every flag of hourglassd."""
    help_text = subprocess.run(
        [env("HOURGLASSD"), "--help"], capture_output=True, text=True,
        timeout=60).stdout
    flags = {m.group(1): m.group(2) for m in _HELP_FLAG.finditer(help_text)}
    if len(flags) < 20:
        raise RuntimeError(f"read only {len(flags)} flags from --help:\n"
                           + help_text)
    return flags


def parse_flags(args):
    """{name: value} of `args` ("--name=value" strings), the last of a
    repeated flag winning, as absl's parser (and etcd's, whose names have
    dashes) has it."""
    flags = {}
    for arg in args:
        match = re.fullmatch(r"--([\w-]+)=(.*)", arg, re.S)
        if not match:
            raise ValueError(f"not a --flag=value argument: {arg!r}")
        flags[match.group(1)] = match.group(2)
    return flags


# --- The metric catalog -------------------------------------------------------

_CATALOG_ENTRY = re.compile(
    r'\{Metric::k\w+,\s*"(hourglass_\w+)",\s*k(Counter|Gauge|Histogram),'
    r'\s*\{([^}]*)\}')

# Series that Prometheus itself adds to every scrape, and the target labels:
# job and instance everywhere, and those Kubernetes' annotation-driven pod
# job (kubernetes-pods in Prometheus's example configuration and the
# community Helm chart) adds to every series of a pod: its namespace, its
# name, and its labels (labelmap), app.kubernetes.io/name among them.
PROMETHEUS_SERIES = {"up": ("gauge", ())}
KUBERNETES_TARGET_LABELS = {"namespace", "pod", "app_kubernetes_io_name"}
TARGET_LABELS = {"job", "instance"} | KUBERNETES_TARGET_LABELS


def catalog():
    """{name: (type, labels)} of broker/metric_catalog.cc, the one list of
    every metric hourglassd exports (the table of docs/metrics.md is checked
    against it by metric_catalog_test)."""
    entries = {}
    for match in _CATALOG_ENTRY.finditer(
            read_text("broker", "metric_catalog.cc")):
        labels = tuple(re.findall(r'"(\w+)"', match.group(3)))
        entries[match.group(1)] = (match.group(2).lower(), labels)
    if len(entries) < 20:
        raise RuntimeError(f"read only {len(entries)} metrics from "
                           "broker/metric_catalog.cc: has its format changed?")
    return entries


def known_metrics():
    """The catalog and Prometheus's own series."""
    known = dict(PROMETHEUS_SERIES)
    known.update(catalog())
    return known


# --- PromQL -------------------------------------------------------------------

FUNCTIONS = {
    # Aggregations.
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
    "count_values", "bottomk", "topk", "quantile",
    # Functions.
    "abs", "absent", "absent_over_time", "avg_over_time", "ceil", "changes",
    "clamp", "clamp_max", "clamp_min", "count_over_time", "day_of_month",
    "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp",
    "floor", "histogram_quantile", "holt_winters", "hour", "idelta",
    "increase", "irate", "label_join", "label_replace", "last_over_time",
    "ln", "log10", "log2", "max_over_time", "min_over_time", "minute",
    "month", "predict_linear", "present_over_time", "quantile_over_time",
    "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt",
    "stddev_over_time", "stdvar_over_time", "sum_over_time", "time",
    "timestamp", "vector", "year",
}
LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left",
                       "group_right"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"}
COUNTER_FUNCTIONS = {"rate", "irate", "increase", "resets"}
GAUGE_FUNCTIONS = {"delta", "deriv", "predict_linear", "idelta"}

_TOKEN = re.compile(r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<duration>\[[^\]]*\])
  | (?P<number>(?<![\w.])(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:e[+-]?\d+)?|\.\d+)(?:[smhdwy]|ms)?)
  | (?P<ident>[A-Za-z_:][\w:]*)
  | (?P<brace>\{)
  | (?P<paren>[()])
  | (?P<other>\S)
""", re.X)


class Reference:
    """One use of a series in an expression: its metric name as written,
    the label names its matchers use, and the function applied to it."""

    def __init__(self, name, labels, function):
        self.name = name
        self.labels = labels
        self.function = function

    def __repr__(self):
        return f"Reference({self.name!r}, {self.labels!r}, {self.function!r})"


def _label_matchers(expr, at):
    """The label names of the matcher list starting at expr[at] == "{",
    and the index after its "}"."""
    end = at + 1
    names = []
    while True:
        match = re.compile(
            r'\s*(?:(\})|,\s*(\})|,?\s*(\w+)\s*(=~|!~|!=|=)\s*'
            r'("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'))').match(expr, end)
        if not match:
            raise ValueError(f"cannot read the label matchers at {at} of "
                             f"{expr!r}")
        end = match.end()
        if match.group(1) or match.group(2):
            return names, end
        names.append(match.group(3))


def parse(expr):
    """The series references and label-list labels (by, on, ...) of the
    PromQL expression `expr`. Raises ValueError for an identifier followed
    by "(" that is no PromQL function."""
    references = []
    list_labels = []
    # The function each open parenthesis belongs to ("" for grouping).
    stack = []
    pending_function = ""
    at = 0
    while at < len(expr):
        match = _TOKEN.match(expr, at)
        if match is None:
            at += 1
            continue
        kind = match.lastgroup
        text = match.group(kind)
        at = match.end()
        if kind == "ident":
            following = expr[at:].lstrip()
            if text in LABEL_LIST_KEYWORDS and following.startswith("("):
                close = expr.index(")", at)
                inside = expr[expr.index("(", at) + 1:close]
                list_labels.extend(
                    label.strip() for label in inside.split(",")
                    if label.strip())
                at = close + 1
            elif (text in FUNCTIONS and
                  re.match(r"(by|without)\s*\(", following)):
                # An aggregation with its label list first:
                # sum by (label) (expression).
                pending_function = text
            elif following.startswith("(") and text not in KEYWORDS:
                if text not in FUNCTIONS:
                    raise ValueError(f"{text}() is no PromQL function in "
                                     f"{expr!r}")
                pending_function = text
            elif text in KEYWORDS or text in LABEL_LIST_KEYWORDS:
                pass
            else:
                labels = []
                rest = expr[at:]
                stripped = len(rest) - len(rest.lstrip())
                if rest.lstrip().startswith("{"):
                    labels, at = _label_matchers(expr, at + stripped)
                function = next((f for f in reversed(stack) if f), "")
                references.append(Reference(text, labels, function))
        elif kind == "brace":
            # A selector without a metric name: {__name__="..."}.
            labels, at = _label_matchers(expr, at - 1)
            references.append(Reference("", labels, ""))
        elif kind == "paren":
            if text == "(":
                stack.append(pending_function)
                pending_function = ""
            elif stack:
                stack.pop()
    return references, list_labels


def check_expression(expr, known=None):
    """The problems of `expr` against the metrics hourglassd exports: names
    not in the catalog, histograms without their _bucket/_sum/_count
    suffix, labels a metric does not have, rate() of a gauge, deriv() of a
    counter. An empty list means none."""
    known = known_metrics() if known is None else known
    problems = []
    try:
        references, list_labels = parse(expr)
    except ValueError as error:
        return [str(error)]
    all_labels = set(TARGET_LABELS)
    for ref in references:
        if not ref.name:
            problems.append(f"a selector without a metric name in {expr!r}")
            continue
        name, suffix = ref.name, ""
        for candidate in ("_bucket", "_sum", "_count"):
            base = ref.name[:-len(candidate)]
            if (ref.name.endswith(candidate) and base in known
                    and known[base][0] == "histogram"):
                name, suffix = base, candidate
        if name not in known:
            problems.append(f"{ref.name} is not a metric hourglassd exports")
            continue
        kind, labels = known[name]
        if kind == "histogram" and not suffix:
            problems.append(f"{name} is a histogram: use {name}_bucket, "
                            "_sum or _count")
        allowed = set(labels) | TARGET_LABELS
        if suffix == "_bucket":
            allowed.add("le")
        all_labels |= allowed
        for label in ref.labels:
            if label not in allowed:
                problems.append(f"{ref.name} has no label {label}")
        counter_like = kind == "counter" or suffix != ""
        if ref.function in COUNTER_FUNCTIONS and not counter_like:
            problems.append(f"{ref.function}() of {ref.name}, a {kind}")
        if ref.function in GAUGE_FUNCTIONS and counter_like:
            problems.append(f"{ref.function}() of {ref.name}, a counter")
    for label in list_labels:
        if label not in all_labels:
            problems.append(f"no metric of {expr!r} has label {label}")
    return problems
