"""The CSV format (``dpgauss.release.engines.csv_format``) on the DuckDB engine, in both modes
(``[source] csv = "rfc4180"``, the default, and ``"lines"``, the line-local reading).

The ``check_*`` functions take the engine and return the ``(spec, salt, aggregate)`` they
computed; ``test_engine_spark.py`` runs the same checks on Spark and compares each aggregate
with DuckDB's.  The regression checks (marked ``regression`` in their docstrings) failed on
the ``read_csv`` engine the line-local format replaced, or (issue #25, finding 5) on the
line-local reading of files written by standard RFC-4180 writers.
"""

from __future__ import annotations

import csv
import gzip
import io
import random
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpgauss.release import ReleaseSpec, bounded_aggregate
from dpgauss.release.engines import csv_format
from dpgauss.release.engines.base import EngineError
from dpgauss.release.engines.duckdb import DuckDBEngine
from dpgauss.release.pipeline import run_release

from ...helpers import charges, make_ledger

LINES = {"csv": "lines"}  # [source] csv = "lines": the line-local reading

ENGINE = DuckDBEngine(threads=2)
SALT = 2024
ROWS = ("read", "malformed_lines", "null_unit", "invalid_domain", "invalid_value")
ROWS += ("outside_domain", "outside_filter", "in_domain", "kept", "units")


def spec_of(path: Path | str, **tables: dict) -> ReleaseSpec:
    """A count over ``key`` in [0, 10), one record per unit ``uid``, unless overridden."""
    data = {
        "source": {"path": str(path)},
        "unit": {"column": "uid"},
        "domain": {"kind": "range", "column": "key", "start": 0, "stop": 10},
        "statistic": {"kind": "count"},
        "bounds": {"max_records_per_unit": 1},
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        "denoise": {"method": "none"},
    }
    for name, value in tables.items():
        replace = name == "bounds" or (name == "domain" and "kind" in value)
        data[name] = value if replace else {**data.get(name, {}), **value}
    return ReleaseSpec.from_dict(data)


def run(spec: ReleaseSpec, engine: object, out: list, salt: int = SALT):
    agg = bounded_aggregate(spec, salt=salt, engine=engine)
    out.append((spec, salt, agg))
    return agg


def write(path: Path, lines: list[bytes], final: bool = True) -> Path:
    path.write_bytes(b"\n".join(lines) + (b"\n" if final else b""))
    return path


# ------------------------------------------------------------- regression checks


def check_unterminated_quote_far_in_the_file(tmp_path: Path, engine: object) -> list:
    """Regression (finding 1): one unit's unterminated quote after DuckDB's sniffing sample
    swallowed the following lines (30,000 one-record units: [30000] → [29000]).  Under
    ``csv = "lines"``; under ``rfc4180`` it does swallow them, by the writer assumption
    (:func:`check_an_unterminated_quote_is_the_rest_of_the_file`)."""
    out: list = []
    lines = [b"uid,key"] + [b"u%d,0" % i for i in range(30_000)]
    plain = write(tmp_path / "d.csv", lines)
    eve = write(tmp_path / "d_eve.csv", [*lines[:25_001], b'eve,0,"oops', *lines[25_001:]])
    base = run(spec_of(plain, source=LINES), engine, out)
    agg = run(spec_of(eve, source=LINES), engine, out)
    assert base.counts[0] == 30_000 and agg.counts[0] == 30_000
    assert agg.rows.malformed_lines == 1 and agg.rows.read == 30_001
    assert agg.rows.in_domain == base.rows.in_domain == 30_000
    return out


def check_unterminated_quote_early_in_the_file(tmp_path: Path, engine: object) -> list:
    """Regression: an unterminated quote inside the first 20k lines (DuckDB's sniffing
    sample) made every release of the file fail (``csv = "lines"``)."""
    out: list = []
    lines = [b"uid,key,note"] + [b"u%d,%d,n" % (i, i % 10) for i in range(3000)]
    lines.insert(101, b'eve,3,"oops')
    agg = run(spec_of(write(tmp_path / "q.csv", lines), source=LINES), engine, out)
    assert agg.counts.tolist() == [300.0] * 10
    assert agg.rows.malformed_lines == 1 and agg.rows.read == 3001
    return out


def check_bare_cr_and_crlf(tmp_path: Path, engine: object) -> list:
    """Regression: a bare CR (data, never a line break) or one CRLF line in an LF file made
    every release fail (DuckDB) or split a record (Spark)."""
    out: list = []
    lines = [b"uid,key,note"] + [b"u%d,%d,n" % (i, i % 10) for i in range(500)]
    # Lines 10, 20, … hold the units u9, u19, … of key 9: these replace them.
    lines[10] = b"cr-in-field,9,x\ry"
    lines[20] = b"cr\runit,9,z"
    lines[30] = b'"quoted\rcr",9,"a\rb"'
    lines[40] = b"crlf,9,w\r"  # one CRLF line: the CR is stripped
    lines[50] = b"two-cr,9,v\r\r"  # only one CR is stripped: the note is "v\r"
    path = write(tmp_path / "cr.csv", [*lines, b"last,6,t\r"], final=False)
    agg = run(spec_of(path), engine, out)
    assert agg.rows.malformed_lines == 0 and agg.rows.read == 501
    assert agg.rows.units == 501  # "cr\runit" is one unit, not two lines
    expected = np.bincount([i % 10 for i in range(500)], minlength=10).astype(float)
    expected[6] += 1
    np.testing.assert_array_equal(agg.counts, expected)
    # The CR is data: "v\r" is not "v", and a value domain sees it.
    values = ["x\ry", "z", "a\rb", "w", "v\r", "t", "n"]
    vals = run(
        spec_of(path, domain={"kind": "values", "column": "note", "values": values}), engine, out
    )
    assert vals.counts.tolist() == [1, 1, 1, 1, 1, 1, 495]
    return out


def check_one_crlf_line_in_an_lf_file(tmp_path: Path, engine: object) -> list:
    """Regression: one CRLF line in an LF file made every release of the file fail."""
    out: list = []
    lines = [b"uid,key,note"] + [b"u%d,%d,n" % (i, i % 10) for i in range(1000)]
    lines[500] = b"crlf,9,n\r"  # replaces u499 (key 9)
    agg = run(spec_of(write(tmp_path / "crlf.csv", lines)), engine, out)
    assert agg.counts.tolist() == [100.0] * 10 and agg.rows.malformed_lines == 0
    vals = run(
        spec_of(
            tmp_path / "crlf.csv", domain={"kind": "values", "column": "note", "values": ["n"]}
        ),
        engine,
        out,
    )
    assert vals.counts.tolist() == [1000.0]  # the CR before the LF is no part of the note
    return out


def check_header_false_extra_field_first(tmp_path: Path, engine: object) -> list:
    """Regression (finding 3): without a header the first line fixed the column count, so one
    unit's extra field on it made every other line malformed ([1000] → [1])."""
    out: list = []
    lines = [b"u%d,0" % i for i in range(1000)]
    source = {"header": False, "columns": ["uid", "key"]}
    base = run(spec_of(write(tmp_path / "h.csv", lines), source=source), engine, out)
    eve = write(tmp_path / "h_eve.csv", [b"eve,0,extra", *lines])
    agg = run(spec_of(eve, source=source), engine, out)
    assert base.counts[0] == agg.counts[0] == 1000
    assert agg.rows.malformed_lines == 1 and agg.rows.read == 1001
    return out


def check_multi_line_record_is_several_lines(tmp_path: Path, engine: object) -> list:
    """Regression (finding 2): under ``csv = "lines"`` a quoted field holding line breaks is
    several lines in both engines (DuckDB read it as one record, Spark as lines): its first
    line is malformed."""
    out: list = []
    ghosts = b"\n".join(b"ghost%d,0,x" % i for i in range(50))
    lines = [b"uid,key,note", b"a,1,ok", b'eve,1,"hi\n' + ghosts + b'\nbye"', b"z,2,ok"]
    agg = run(spec_of(write(tmp_path / "m.csv", lines), source=LINES), engine, out)
    assert agg.counts[:3].tolist() == [50.0, 1.0, 1.0]
    assert agg.rows.malformed_lines == 2  # 'eve,1,"hi' and 'bye"'
    assert agg.rows.read == 54 and agg.rows.units == 52
    return out


def write_csv(path: Path, rows: list[list[str]], **fmt: object) -> Path:
    """``rows`` written by Python's ``csv`` module (CRLF line ends, minimal quoting)."""
    buf = io.StringIO(newline="")
    csv.writer(buf, **fmt).writerows(rows)  # type: ignore[arg-type]
    path.write_text(buf.getvalue(), encoding="utf-8", newline="")
    return path


GHOST_NOTE = "hi\n" + "\n".join(f"ghost{j},0,x" for j in range(50)) + "\nbye"


def check_a_multi_line_note_is_one_record(tmp_path: Path, engine: object) -> list:
    """Regression (issue #25, finding 5): a file written by Python's csv module, 100 units
    of one record, one of them with a 50-line note whose lines look like records.  The
    line-local reading added 50 ghost units (and lost the unit's own record): 100 → 149
    units (150 records); under
    ``rfc4180`` (the default) the release counts the 100 units."""
    out: list = []
    rows = [["uid", "key", "note"]]
    rows += [[f"u{i}", str(i % 10), GHOST_NOTE if i == 7 else "n"] for i in range(100)]
    path = write_csv(tmp_path / "ghost.csv", rows)
    agg = run(spec_of(path), engine, out)
    assert agg.counts.tolist() == [10.0] * 10
    assert (agg.rows.units, agg.rows.read, agg.rows.malformed_lines) == (100, 100, 0)
    note = run(
        spec_of(path, domain={"kind": "values", "column": "note", "values": [GHOST_NOTE]}),
        engine,
        out,
    )
    assert note.counts.tolist() == [1.0]  # the note, line breaks and all
    lines = run(spec_of(path, source=LINES), engine, out)  # the reading of the finding
    assert lines.rows.units == 149 and lines.rows.malformed_lines == 2
    assert lines.counts[0] == 10 + 50 and lines.counts[7] == 9
    return out


#: Values that standard writers quote: line breaks, quotes, delimiters, CR, unicode.
TRICKY = [
    "plain",
    "a,b",
    'say "hi"',
    "line1\nline2",
    "crlf\r\nend",
    "cr\ronly",
    '"',
    '""',
    "x\n",
    "\n",
    "\r\n",
    "\u00e9\U0001f600",
    "trailing space ",
    " ",
    "multi\n\n\nblank",
    "\\n escaped",
    "tab\tstop",
    'end quote"',
    '"\n"\n"',
    "uid,note,key",  # the header's text as a value
]


def tricky_frame(copies: int = 30) -> Any:
    """A pandas frame of one record per unit: ``note`` cycles through :data:`TRICKY`."""
    import pandas as pd

    n = copies * len(TRICKY)
    return pd.DataFrame(
        {
            "uid": [f"u{i}" for i in range(n)],
            "note": [TRICKY[i % len(TRICKY)] for i in range(n)],
            "key": [i % 10 for i in range(n)],
        }
    )


def check_files_written_by_standard_tools(tmp_path: Path, engine: object) -> list:
    """Files written by pandas.to_csv (LF and CRLF), DuckDB's COPY and Python's csv module
    read back exactly: every record, every note (:data:`TRICKY`), nothing malformed; and
    the pure-Python reading (split_records, parse_record) says the same."""
    duckdb = pytest.importorskip("duckdb")
    out: list = []
    df = tricky_frame()
    paths = {
        "pandas-lf": tmp_path / "pandas_lf.csv",
        "pandas-crlf": tmp_path / "pandas_crlf.csv",
        "duckdb": tmp_path / "duckdb.csv",
    }
    df.to_csv(paths["pandas-lf"], index=False)
    df.to_csv(paths["pandas-crlf"], index=False, lineterminator="\r\n")
    con = duckdb.connect()
    con.register("tricky", df)
    con.execute(f"COPY tricky TO '{paths['duckdb']}' (HEADER)")
    con.close()
    rows = [["uid", "note", "key"], *df.astype(str).values.tolist()]
    paths["python-csv"] = write_csv(tmp_path / "python.csv", rows)
    for name, path in paths.items():
        data = path.read_bytes()
        assert data.count(b"\n") > len(df) + 1, name  # the file has quoted line breaks
        header, *records = csv_format.split_records(data)
        assert header == b"uid,note,key", name
        parsed = [csv_format.parse_record(r, ",", 3) for r in records]
        assert parsed == [[u, n, str(k)] for u, n, k in df.values.tolist()], name
        agg = run(
            spec_of(path, domain={"kind": "values", "column": "note", "values": TRICKY}),
            engine,
            out,
        )
        assert agg.counts.tolist() == [len(df) / len(TRICKY)] * len(TRICKY), name
        assert (agg.rows.read, agg.rows.malformed_lines) == (len(df), 0), name
        keys = run(spec_of(path), engine, out)
        assert keys.counts.tolist() == [len(df) / 10] * 10, name
    return out


def check_an_unterminated_quote_is_the_rest_of_the_file(tmp_path: Path, engine: object) -> list:
    """Under ``rfc4180`` a record with an unbalanced quote (which a correct writer never
    writes) swallows the lines after it: the rest of the file is one malformed record — the
    writer assumption, and why ``csv = "lines"`` exists.  With a second stray quote further
    on, the lines between are one malformed record and reading resumes after it."""
    out: list = []
    lines = [b"uid,key"] + [b"u%d,%d" % (i, i % 10) for i in range(100)]
    eve = write(tmp_path / "eve.csv", [*lines[:51], b'eve,0,"oops', *lines[51:]])
    agg = run(spec_of(eve), engine, out)
    assert (agg.rows.read, agg.rows.malformed_lines, agg.rows.units) == (51, 1, 50)
    assert run(spec_of(eve, source=LINES), engine, out).rows.units == 100
    two = write(
        tmp_path / "two.csv", [*lines[:51], b'eve,0,"oops', *lines[51:61], b'"', *lines[61:]]
    )
    agg = run(spec_of(two), engine, out)
    assert (agg.rows.read, agg.rows.malformed_lines, agg.rows.units) == (91, 1, 90)
    for final in (True, False):  # the rest ends with or without its LF (and a CR)
        rest = write(tmp_path / f"end{final}.csv", [*lines, b'eve,0,"oops\r', b"z,1\r"], final)
        agg = run(spec_of(rest), engine, out)
        assert (agg.rows.read, agg.rows.malformed_lines, agg.rows.units) == (101, 1, 100)
    return out


def check_a_header_of_several_lines(tmp_path: Path, engine: object) -> list:
    """Under ``rfc4180`` a header record may span lines (a quoted name holding an LF): it
    names the columns, every file starts with it, and a record equal to it is dropped."""
    out: list = []
    header = b'uid,"the\nkey"\r'
    write(tmp_path / "h1.csv", [header, b"a,1", b'b,"2"', header, b"c,3"])
    write(tmp_path / "h2.csv", [header, b'"d\n",4'])
    spec = spec_of(tmp_path / "h*.csv", domain={"column": "the\nkey"})
    assert list(engine.describe(spec)) == ["uid", "the\nkey"]
    agg = run(spec, engine, out)
    assert agg.counts[:5].tolist() == [0.0, 1.0, 1.0, 1.0, 1.0]
    assert (agg.rows.read, agg.rows.malformed_lines) == (4, 0)
    other = write(tmp_path / "z3.csv", [b"uid,the", b"key", b"e,5"])  # two records
    both = spec_of(tmp_path / "h1.csv", source={"path": [str(tmp_path / "h1.csv"), str(other)]})
    with pytest.raises(EngineError, match=r"z3\.csv: its header \['uid', 'the'\] differs"):
        engine.describe(both)
    return out


# ------------------------------------------------------------------ line classes

# (line with {d} for the delimiter, the value of `v`, or MALFORMED / NULL)
MALFORMED, NULL = "malformed", None
CASES: list[tuple[bytes, str | None]] = [
    (b'q1{d}"a{d}b"', "a{d}b"),  # the delimiter inside quotes
    (b'q2{d}"a""b"', 'a"b'),  # a doubled quote
    (b'q3{d}""', ""),  # empty quoted: the empty string
    (b"q4{d}", NULL),  # empty unquoted: NULL (invalid domain value)
    (b'q5{d}"x"y', MALFORMED),  # text after the closing quote
    (b'q6{d}x"y', MALFORMED),  # a quote inside an unquoted field
    (b'q7{d}"x', MALFORMED),  # an unterminated quote
    (b"q8{d}a\x00b", "a\x00b"),  # a NUL byte is data
    (b"q9{d}\xffx", MALFORMED),  # invalid UTF-8
    (b"q10{d}\xc3", MALFORMED),  # a truncated UTF-8 sequence
    (b"q11{d}\xef\xbf\xbd", MALFORMED),  # U+FFFD
    (b'q12{d}"a\xe2\x80\xa8b"', "a\u2028b"),  # U+2028 inside a quoted field
    (b"q13{d}c\xe2\x80\xa8d", "c\u2028d"),  # … and an unquoted one
    (b"q14{d}a{d}b", MALFORMED),  # too many fields
    (b"q15", MALFORMED),  # too few
    (b"", MALFORMED),  # an empty line: one empty field
    (b"q16{d} x ", " x "),  # nothing is trimmed
    (b'"q17"{d}""""', '"'),  # a field of quotes only
    (b'q18{d}"""a"""', '"a"'),
    (b'q19{d}"e\rf"', "e\rf"),  # a CR inside quotes
    (b"q20{d}\xc3\xa9\xf0\x9f\x98\x80", "\u00e9\U0001f600"),
    (b'q21{d}"crlf"\r', "crlf"),  # a CRLF line
    (b"q22{d}tab\tcomma,semi;pipe|", "tab\tcomma,semi;pipe|"),  # other delimiters: data
    (b"q23{d}\xef\xbb\xbfbom", "\ufeffbom"),  # a byte order mark inside a file is data
    (b'"q24{d}x"{d}y', "y"),  # a quoted unit id holding the delimiter
    (b"uid{d}v", "header"),  # the header line, in the middle: no row at all
    (b'"uid"{d}v', "v"),  # the header spelled differently: a record
    (b"q25{d}end", "end"),  # the last line, without LF
]
# Records of more than one line: read so under rfc4180 only (under lines they are lines).
RFC_CASES: list[tuple[bytes, str | None]] = [
    (b'm1{d}"a\nb"', "a\nb"),  # a quoted LF
    (b'm2{d}"a\r\nb"', "a\r\nb"),  # a quoted CRLF: the CR is data
    (b'm3{d}"\n"', "\n"),
    (b'm4{d}"x""\n""y"', 'x"\n"y'),  # doubled quotes around an LF
    (b'"m5\nid"{d}v5', "v5"),  # a unit id holding an LF
    (b'm6{d}"a\n\nb"\r', "a\n\nb"),  # an empty line inside quotes; a CRLF end
    (b'm7{d}"a{d}\n{d}b"', "a{d}\n{d}b"),  # delimiters and an LF inside quotes
    (b'm8{d}"a\nb"c', MALFORMED),  # text after the closing quote
    (b'm9{d}"a\n"{d}extra', MALFORMED),  # too many fields
    (b'm10{d}"a\nb\xff"', MALFORMED),  # invalid UTF-8 on a later line
    (b'm11{d}"a\n\xef\xbf\xbd"', MALFORMED),  # U+FFFD on a later line
    (b'm12{d}"\xc3\n\xa9"', MALFORMED),  # an LF inside a UTF-8 sequence
    (b'm13{d}"\xc3\xa9\n\xf0\x9f\x98\x80"', "\u00e9\n\U0001f600"),
    (b'm14{d}"\n\n\n"', "\n\n\n"),
    (b'm15{d}"uid\nv"', "uid\nv"),
]


def case_lines(delimiter: str, mode: str = "lines") -> tuple[list[bytes], list[str], int, int]:
    """(the file's records, the expected values, malformed, NULL values) for a delimiter.

    Under rfc4180 the cases with an odd number of quotes are left out (by the writer
    assumption they do not occur: they would join the following lines), and the records of
    several lines are added."""
    d = delimiter.encode()
    lines = [b"uid" + d + b"v"]
    values, malformed, nulls = [], 0, 0
    cases = CASES if mode == "lines" else [*RFC_CASES, *CASES]
    for raw, value in cases:
        if raw.replace(b"{d}", b"") != raw and d in raw.replace(b"{d}", b""):
            continue  # the case's data holds this delimiter: it would test something else
        if mode == "rfc4180" and raw.count(b'"') % 2:
            continue
        lines.append(raw.replace(b"{d}", d))
        if value == MALFORMED:
            malformed += 1
        elif value is NULL:
            nulls += 1
        elif value != "header":
            values.append(value.replace("{d}", delimiter))
    return lines, values, malformed, nulls


def check_line_classes(
    tmp_path: Path, engine: object, delimiter: str = ",", mode: str = "lines"
) -> list:
    """Every class of record, with the pure-Python reading of csv_format as the reference."""
    out: list = []
    lines, values, malformed, nulls = case_lines(delimiter, mode)
    path = write(tmp_path / f"c{ord(delimiter)}{mode}.csv", lines, final=False)
    spec = spec_of(
        path,
        source={"delimiter": delimiter, "csv": mode},
        domain={"kind": "values", "column": "v", "values": values},
    )
    agg = run(spec, engine, out)
    assert agg.counts.tolist() == [1.0] * len(values)
    r = agg.rows
    assert r.malformed_lines == malformed and r.invalid_domain == nulls
    assert r.read == len(lines) - 2  # the header, and the header line in the middle
    assert (r.null_unit, r.outside_domain, r.in_domain) == (0, 0, len(values))
    # The pure-Python reading of csv_format says the same.
    header, *rest = csv_format.split_records(path.read_bytes(), mode)
    assert len(rest) == len(lines) - 1
    parsed = [csv_format.parse_record(x, delimiter, 2) for x in rest if x != header]
    assert sum(p is None for p in parsed) == malformed
    got = [p[1] for p in parsed if p is not None]
    assert sorted(got, key=repr) == sorted([*values, *[None] * nulls], key=repr)
    return out


def check_files_and_headers(tmp_path: Path, engine: object) -> list:
    """Several files by a recursive glob, headers with CRLF or a byte order mark, a file
    without a final LF, a header line in the middle of a file, and gzip."""
    out: list = []
    root = tmp_path / "parts"
    (root / "sub").mkdir(parents=True)
    write(root / "a.csv", [b"uid,key", b"a1,1", b"a2,2"])
    (root / "b.csv").write_bytes(b"\xef\xbb\xbfuid,key\r\nb1,1\r\nuid,key\r\nb2,3")
    write(root / "sub" / "c [1].csv", [b"uid,key", b"c1,4", b"uid,key\r", b'"uid",key'])
    with gzip.open(root / "sub" / "d.csv.gz", "wb") as f:
        f.write(b"uid,key\nd1,5\n")
    write(root / "empty.csv", [], final=False)  # no lines: no header to check
    spec = spec_of(root / "**" / "*.csv*")
    assert list(engine.describe(spec)) == ["uid", "key"]
    agg = run(spec, engine, out)
    assert agg.counts[:6].tolist() == [0.0, 2.0, 1.0, 1.0, 1.0, 1.0]
    # '"uid",key' is a record (unit "uid", key "key": invalid); the header lines are no rows.
    assert (agg.rows.read, agg.rows.invalid_domain, agg.rows.malformed_lines) == (7, 1, 0)
    # [source] columns may restate the header.
    same = spec_of(root / "**" / "*.csv*", source={"columns": ["uid", "key"]})
    assert engine.describe(same) == engine.describe(spec)
    return out


def check_source_errors(tmp_path: Path, engine: object) -> None:
    """Problems of a CSV source are one-line errors naming the file, from ``describe``."""
    good = write(tmp_path / "a.csv", [b"uid,key", b"u,1"])
    cases = {
        "other.csv": ([b"uid,kee", b"v,1"], r"other\.csv: its header \['uid', 'kee'\] differs"),
        "spelt.csv": ([b'"uid",key'], r"spelt\.csv: its header line spells the column names"),
        "dup.csv": ([b"uid,uid"], r"repeats the column names \['uid'\]"),
        "gap.csv": ([b"uid,,key"], r"has an empty column name"),
        "bad.csv": ([b"uid,\xff"], r"header line is not valid UTF-8"),
        "open.csv": ([b'uid,"key'], r"header line is not a row of fields"),
    }
    for name, (lines, message) in cases.items():
        path = write(tmp_path / name, lines)
        spec = spec_of(tmp_path / "a.csv", source={"path": [str(good), str(path)]})
        if name not in ("other.csv", "spelt.csv"):  # the header's own problems
            spec = spec_of(path)
        with pytest.raises(EngineError, match=message) as info:
            engine.describe(spec)
        assert "\n" not in str(info.value)
        assert name in str(info.value)
    with pytest.raises(EngineError, match=r"no file matches '.*nothing-\*\.csv'"):
        engine.describe(spec_of(tmp_path / "nothing-*.csv"))
    with pytest.raises(EngineError, match="is a directory"):
        engine.describe(spec_of(tmp_path))
    with pytest.raises(EngineError, match=r"columns \['uid', 'k'\] must equal the header"):
        engine.describe(spec_of(good, source={"columns": ["uid", "k"]}))
    with pytest.raises(EngineError, match="has no header line"):
        engine.describe(spec_of(write(tmp_path / "none.csv", [], final=False)))
    with pytest.raises(EngineError, match=r"column 'zone' is not a column of the source"):
        bounded_aggregate(spec_of(good, domain={"column": "zone"}), engine=engine)


# -------------------------------------------------------------- the DuckDB tests


def test_unterminated_quote_far_in_the_file(tmp_path: Path) -> None:
    check_unterminated_quote_far_in_the_file(tmp_path, ENGINE)


def test_unterminated_quote_early_in_the_file(tmp_path: Path) -> None:
    check_unterminated_quote_early_in_the_file(tmp_path, ENGINE)


@pytest.mark.slow
def test_bare_cr_and_crlf(tmp_path: Path) -> None:
    check_bare_cr_and_crlf(tmp_path, ENGINE)


def test_one_crlf_line_in_an_lf_file(tmp_path: Path) -> None:
    check_one_crlf_line_in_an_lf_file(tmp_path, ENGINE)


def test_header_false_extra_field_first(tmp_path: Path) -> None:
    check_header_false_extra_field_first(tmp_path, ENGINE)


def test_multi_line_record_is_several_lines(tmp_path: Path) -> None:
    check_multi_line_record_is_several_lines(tmp_path, ENGINE)


def test_a_multi_line_note_is_one_record(tmp_path: Path) -> None:
    check_a_multi_line_note_is_one_record(tmp_path, ENGINE)


@pytest.mark.slow
def test_files_written_by_standard_tools(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    check_files_written_by_standard_tools(tmp_path, ENGINE)


@pytest.mark.slow
def test_an_unterminated_quote_is_the_rest_of_the_file(tmp_path: Path) -> None:
    check_an_unterminated_quote_is_the_rest_of_the_file(tmp_path, ENGINE)


def test_a_header_of_several_lines(tmp_path: Path) -> None:
    check_a_header_of_several_lines(tmp_path, ENGINE)


@pytest.mark.slow
@pytest.mark.parametrize("mode", csv_format.MODES)
@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|", "\\", "]", "^", "é", "\x00"])
def test_line_classes(tmp_path: Path, delimiter: str, mode: str) -> None:
    check_line_classes(tmp_path, ENGINE, delimiter, mode)


def test_files_and_headers(tmp_path: Path) -> None:
    check_files_and_headers(tmp_path, ENGINE)


def test_source_errors(tmp_path: Path) -> None:
    check_source_errors(tmp_path, ENGINE)


@pytest.mark.slow
def test_source_errors_come_before_charging(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path)
    a = write(tmp_path / "a.csv", [b"uid,key", b"u,1"])
    b = write(tmp_path / "b.csv", [b"uid,kee", b"v,1"])
    spec = spec_of(a, source={"path": [str(a), str(b)]})
    with pytest.raises(ValueError, match=r"b\.csv: its header"):
        run_release(spec, out=tmp_path / "o.csv", ledger=ledger, engine=ENGINE)
    assert charges(ledger) == 0 and not (tmp_path / "o.csv").exists()


def test_the_line_reader_is_scanned_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # kde spreading runs two queries over the bounded rows: the lines are still read once.
    starts: list[int] = []
    original = csv_format.line_batches

    def counted(*args: object, **kwargs: object):
        starts.append(1)
        yield from original(*args, **kwargs)

    monkeypatch.setattr(csv_format, "line_batches", counted)
    lines = [b"uid,lat,lon,fare"] + [
        b"u%d,40.75%02d,-73.98%02d,%d" % (i, i % 100, i % 37, i % 30) for i in range(2000)
    ]
    graph = {"kind": "graph", "graph": "manhattan", "lat": "lat", "lon": "lon"}
    spec = spec_of(
        write(tmp_path / "k.csv", lines),
        domain={**graph, "mapping": "kde", "bandwidth": 50.0},
        statistic={"kind": "sum", "column": "fare", "lower": 0, "upper": 20},
        bounds={"max_records_per_unit": 1},
    )
    agg = bounded_aggregate(spec, salt=1, engine=ENGINE)
    assert starts == [1]
    assert agg.counts.sum() == pytest.approx(agg.rows.kept) and agg.rows.kept > 1000


@pytest.mark.slow
def test_a_crlf_file_equals_its_lf_version(tmp_path: Path) -> None:
    lines = [b"uid,key,v"] + [b'u%d,%d,"%d"' % (i, i % 10, i) for i in range(300)]
    lf = write(tmp_path / "lf.csv", lines)
    crlf = tmp_path / "crlf.csv"
    crlf.write_bytes(b"\r\n".join(lines) + b"\r\n")
    a, b = (bounded_aggregate(spec_of(p), salt=5, engine=ENGINE) for p in (lf, crlf))
    np.testing.assert_array_equal(a.counts, b.counts)
    assert a.rows == b.rows
    # The priority hashes the line after the CR strip: the same records are kept.
    spec = {"bounds": {"max_records_per_unit": 1}, "unit": {"column": "key"}}
    a, b = (bounded_aggregate(spec_of(p, **spec), salt=5, engine=ENGINE) for p in (lf, crlf))
    np.testing.assert_array_equal(a.counts, b.counts)


def test_a_long_line_and_small_chunks(tmp_path: Path) -> None:
    # A line longer than many read chunks, and a quoted field of 10^5 doubled quotes.
    long = b"big," + b"1" + b"," + b'"' + b'""' * 100_000 + b"x" * 300_000 + b'"'
    lines = [b"uid,key,v", b"a,1,x", long, b"b,2,y"]
    path = write(tmp_path / "l.csv", lines)
    got = [
        v.as_py()
        for batch in csv_format.line_batches([str(path)], ",", 3, chunk_bytes=4096)
        for v in batch.column(0)
    ]
    assert got == [x.decode() for x in lines]
    agg = bounded_aggregate(spec_of(path), salt=1, engine=ENGINE)
    assert agg.counts[:3].tolist() == [0.0, 2.0, 1.0] and agg.rows.malformed_lines == 0


@pytest.mark.slow
@pytest.mark.parametrize("crlf", [False, True])
def test_a_record_of_many_lines_over_many_chunks(tmp_path: Path, crlf: bool) -> None:
    # One quoted field of 200,000 lines (about 1.4 MB) read in chunks of 4 KB: assembled once
    # (linear time), its LFs (and CRs) kept, the records around it intact.
    nl = b"\r\n" if crlf else b"\n"
    note = nl.join(b'l%d ""q"",' % i for i in range(200_000))
    records = [b"uid,key,v", b"a,1,x", b'big,2,"' + note + b'"', b"b,3,y"]
    path = tmp_path / "many.csv"
    path.write_bytes(nl.join(records) + nl)
    start = time.process_time()
    got = [
        v.as_py()
        for batch in csv_format.line_batches([str(path)], ",", 3, 4096, "rfc4180")
        for v in batch.column(0)
    ]
    assert time.process_time() - start < 20  # quadratic would be ~1e5 rescans of ~1 MB
    assert got == [x.decode() for x in records]
    values = ["x", "y", note.decode().replace('""', '"')]
    agg = bounded_aggregate(
        spec_of(path, domain={"kind": "values", "column": "v", "values": values}),
        salt=1,
        engine=ENGINE,
    )
    assert agg.counts.tolist() == [1.0, 1.0, 1.0] and agg.rows.malformed_lines == 0


def test_split_records() -> None:
    f = csv_format.split_records
    assert f(b"") == [] and f(csv_format.BOM) == [] and f(b"\n") == [b""]
    assert f(b'a,"x\ny"\nb\n') == [b'a,"x\ny"', b"b"]
    assert f(b'a,"x\r\ny"\r\nb\r\n') == [b'a,"x\r\ny"', b"b"]  # only the end's CR goes
    assert f(b'a,"x""\n""y"\n') == [b'a,"x""\n""y"']
    assert f(b'\xef\xbb\xbf"h\n"\nx') == [b'"h\n"', b"x"]
    assert f(b'"\n\n"\n\n') == [b'"\n\n"', b""]
    # An unterminated quote: the rest is one record, to the LF of its last line (excluded).
    assert f(b'a\n"b\nc\n') == f(b'a\n"b\nc') == [b"a", b'"b\nc']
    assert f(b'a\n"b\r\nc\r\n') == [b"a", b'"b\r\nc']
    assert f(b'"\n\n') == [b'"\n'] and f(b'x"\r') == [b'x"']
    # Without a quoted LF both modes read the same records; "lines" reads lines.
    data = b'a,"b"\r\n"c,d",e\n\nf\rg'
    assert f(data) == f(data, "lines") == csv_format.split_lines(data)
    assert f(b'a,"x\ny"\n', "lines") == [b'a,"x', b'y"']
    with pytest.raises(ValueError, match="csv mode must be one of 'rfc4180', 'lines'"):
        f(b"", "excel")


def test_first_record(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_bytes(b'\xef\xbb\xbfuid,"a\r\nb"\r\nx,1\r\n')
    assert csv_format.first_record(str(path), "rfc4180") == b'uid,"a\r\nb"'
    assert csv_format.first_record(str(path), "lines") == csv_format.first_line(str(path))
    assert csv_format.first_line(str(path)) == b'uid,"a'
    path.write_bytes(b'uid,"' + b"x\n" * 40_000)  # unterminated: the whole file
    assert csv_format.first_record(str(path), "rfc4180") == b'uid,"' + b"x\n" * 39_999 + b"x"
    with pytest.raises(csv_format.CsvError, match="the first record is longer than 1000 bytes"):
        csv_format.first_record(str(path), "rfc4180", limit=1000)


# ------------------------------------------------------------ the format itself


def test_split_lines() -> None:
    f = csv_format.split_lines
    assert f(b"") == [] and f(csv_format.BOM) == [] and f(b"\n") == [b""] and f(b"\r") == [b""]
    assert f(b"a\r\nb\rc\r\r\nd\r") == [b"a", b"b\rc\r", b"d"]
    assert f(b"\xef\xbb\xbfh\nx\n\xef\xbb\xbfy") == [b"h", b"x", b"\xef\xbb\xbfy"]
    assert f(b"a\n\n") == [b"a", b""] and f(b"\xef\xbb\xbf\n") == [b""]


def _text(line: bytes) -> str | None:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _segments(line: bytes, delimiter: bytes) -> list[str | None]:
    """csv_format.segment_value_sql, in Python: the values of a line the reader decided."""
    parts = [x.decode() for x in line.split(delimiter)]
    return [None if x == "" else x[1:-1] if x.startswith('"') else x for x in parts]


@pytest.mark.slow
@pytest.mark.parametrize("mode", csv_format.MODES)
@pytest.mark.parametrize("delimiter", [",", ";", "é"])
def test_the_reader_reads_records_as_the_reference(
    tmp_path: Path, delimiter: str, mode: str
) -> None:
    rng = random.Random(0)
    d = delimiter.encode()
    atoms = [b"a", d, d, b'"', b'"', b"\r", b"\n", b"\n", csv_format.BOM, b"\xff", b"\x00"]
    atoms += [b"\xc3\xa9", b"\xc3", b"\xed\xa0\x80", b"\xf0\x9f\x98\x80", b"\xef\xbf\xbd"]
    atoms += [b'"x"' + d, d + b'"y"', b'""']
    path = tmp_path / "r.bin"
    decided = 0
    for _ in range(800):
        data = b"".join(rng.choice(atoms) for _ in range(rng.randint(0, 40)))
        path.write_bytes(data)
        chunk = rng.choice([1, 2, 3, 7, 64, 1 << 16])
        n = rng.choice([1, 2, 3])
        batches = list(csv_format.line_batches([str(path)], delimiter, n, chunk, mode))
        got = [v.as_py() for b in batches for v in b.column(0)]
        want = csv_format.split_records(data, mode)
        assert got == [_text(x) for x in want], data  # invalid UTF-8 (a surrogate too): NULL
        kinds = [k.as_py() for b in batches for k in b.column(1)]
        for line, kind in zip(want, kinds, strict=True):
            record = csv_format.parse_record(line, delimiter, n)
            if kind == csv_format.RECORD:
                assert record is not None and _segments(line, d) == record, line
                decided += 1
            elif kind == csv_format.MALFORMED:
                assert record is None, line
            else:
                assert _text(line) is not None and "\ufffd" not in _text(line), line
                assert len(d) > 1 or not _segments_shaped(line, d), line
    assert decided > 100 or len(d) > 1  # a non-ASCII delimiter: every line to the regex


def _segments_shaped(line: bytes, d: bytes) -> bool:
    """Whether every segment of the line is quote-free or ``"X"`` with X quote-free."""
    return all(
        x.count(b'"') == 0 or (x.count(b'"') == 2 and len(x) >= 2 and x[0] == x[-1] == 34)
        for x in line.split(d)
    )


def _python(pattern: str) -> re.Pattern[str]:
    """An RE2/Java pattern of csv_format in Python's syntax (\\x{…} and \\z)."""
    text = re.sub(r"\\x\{([0-9A-F]+)\}", lambda m: f"\\U{int(m.group(1), 16):08x}", pattern)
    return re.compile(text.replace(r"\z", r"\Z"))


def _unquote(g: str, mode: str = "lines") -> str | None:
    """csv_format.unquote_sql, in Python."""
    if g == "":
        return None
    if g[0] in '"\n':
        orig = g.replace("\n", '""')
        value = orig[1:-1].replace('""', '"')
        return value.replace(csv_format.NEWLINE, "\n") if mode == "rfc4180" else value
    return g


LINE_ATOMS = ['"', '"', '""', ",", ",", ";", "a", "1", "\r", "\x00", "\u2028", "é", "😀", "\\"]


def _fold(line: str, mode: str) -> str:
    """csv_format.fold_sql, in Python."""
    if mode == "rfc4180":
        line = line.replace("\n", csv_format.NEWLINE)
    return line.replace('""', csv_format.PLACEHOLDER)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(LINE_ATOMS), max_size=16).map("".join),
    st.sampled_from([",", ";", "a", "\\"]),
    st.integers(1, 4),
)
def test_the_folded_regex_is_the_grammar(line: str, delimiter: str, n: int) -> None:
    ref = csv_format.parse_fields(line, delimiter)
    ok = ref is not None and len(ref) == n
    assert bool(_python(csv_format.record_regex(delimiter, n)).match(line)) == ok
    folded = _fold(line, "lines")
    m = _python(csv_format.folded_record_regex(delimiter, n, range(n))).match(folded)
    assert bool(m) == ok
    if m:
        assert [_unquote(g) for g in m.groups()] == ref
        if '"' not in line:  # DuckDB's string_split: the fields between delimiters
            assert [x or None for x in line.split(delimiter)] == ref


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from([*LINE_ATOMS, "\n", "\n", '"\n', '\n"', "\r\n"]), max_size=16).map(
        "".join
    ),
    st.sampled_from([",", ";", "a", "\\"]),
    st.integers(1, 4),
)
def test_the_rfc4180_folded_regex_is_the_grammar(line: str, delimiter: str, n: int) -> None:
    # A record text holding LFs (rfc4180): the fold puts U+FFFD for each LF first.
    ref = csv_format.parse_fields(line, delimiter)
    ok = ref is not None and len(ref) == n
    assert bool(_python(csv_format.record_regex(delimiter, n)).match(line)) == ok
    regex = csv_format.folded_record_regex(delimiter, n, range(n), "rfc4180")
    m = _python(regex).match(_fold(line, "rfc4180"))
    assert bool(m) == ok
    if m:
        assert [_unquote(g, "rfc4180") for g in m.groups()] == ref


def test_delimiters_and_columns_in_the_spec() -> None:
    for bad in ('"', "\r", "\n", "\ufffd", ";;", ""):
        with pytest.raises(ValueError, match=r"\[source\] delimiter must be"):
            spec_of("a.csv", source={"delimiter": bad})
    with pytest.raises(ValueError, match=r"\[source\] header = false needs columns"):
        spec_of("a.csv", source={"header": False})
    with pytest.raises(ValueError, match=r"\[source\] columns applies to CSV"):
        spec_of("a.parquet", source={"columns": ["uid", "key"]})
    with pytest.raises(ValueError, match=r"\[source\] columns must be a list of distinct"):
        spec_of("a.csv", source={"columns": ["uid", "uid"]})
    spec = spec_of("a.csv", source={"header": False, "columns": ["uid", "key"]})
    assert spec.source.columns == ("uid", "key")
    assert spec.to_dict()["source"]["columns"] == ["uid", "key"]
    # [source] csv: which writer made the file.
    assert spec.source.csv == "rfc4180" and spec.to_dict()["source"]["csv"] == "rfc4180"
    assert spec_of("a.csv", source=LINES).source.csv == "lines"
    for bad in ("excel", "RFC4180", "", None, 1):
        with pytest.raises((ValueError, TypeError), match=r"\[source\] csv must be one of"):
            spec_of("a.csv", source={"csv": bad})


# ------------------------------------------------------- one line, its own share

HEADER = b"uid,key,v\r"
BASE = [HEADER] + [
    (b'base%d,%d,"%d"' if i % 3 == 0 else b"base%d,%d,%d") % (i, i % 6, i % 13) for i in range(60)
]
PROPERTY = {
    "domain": {"kind": "range", "column": "key", "start": 0, "stop": 5},
    "statistic": {"kind": "sum", "column": "v", "lower": 0, "upper": 10},
    "bounds": {"max_records_per_unit": 2},
}
BYTE_ATOMS = [
    b'"',
    b'"',
    b",",
    b",",
    b"\r",
    b"\x00",
    b"\xff",
    b"\xc3",
    b"\xef\xbf\xbd",
    b"\xe2\x80\xa8",
    b"\xf0\x9f\x98\x80",
    csv_format.BOM,
    b"x",
    b" ",
    b"uid",
]
FIELDS = [b"1", b"3", b"4", b"7", b'"2"', b'""', b"", b"nan", b"u1", b'"u,2"', b"9.5"]


SEPARATORS = [b","] * 12 + [b";", b'","', b", ", b'"']
COUNTS = [3] * 7 + [1, 2, 4]
SPECIAL = [HEADER, HEADER[:-1], b""]


def extra_lines() -> st.SearchStrategy[bytes]:
    """Lines (no LF) that are often records, often nearly records, sometimes the header."""
    garbage = st.lists(st.sampled_from(BYTE_ATOMS), max_size=6).map(b"".join)
    field = st.one_of(st.sampled_from(FIELDS), st.sampled_from(FIELDS), garbage)
    record = st.sampled_from(COUNTS).flatmap(
        lambda n: st.lists(st.tuples(field, st.sampled_from(SEPARATORS)), min_size=n, max_size=n)
    )
    records = record.map(lambda fs: b"".join(f + s for f, s in fs)[: -len(fs[-1][1])])
    return st.one_of(records, records, records, garbage, st.sampled_from(SPECIAL))


def random_line(rng: random.Random) -> bytes:
    """A line drawn like :func:`extra_lines` draws them (for the Spark test's batch)."""

    def garbage() -> bytes:
        return b"".join(rng.choice(BYTE_ATOMS) for _ in range(rng.randint(0, 6)))

    kind = rng.random()
    if kind < 0.1:
        return rng.choice(SPECIAL)
    if kind < 0.25:
        return garbage()
    fields = [rng.choice(FIELDS) if rng.random() < 0.7 else garbage() for _ in range(3)]
    fields = fields[: rng.choice(COUNTS)] or [b""]
    return b"".join(f + rng.choice(SEPARATORS) for f in fields[:-1]) + fields[-1]


def check_one_line_adds_its_own_contribution(
    tmp_path: Path,
    engine: object,
    extra: list[bytes],
    where: list[int],
    final: bool,
    mode: str = "lines",
) -> list:
    """agg(D + lines) = agg(D) + agg(header + lines): each line, inserted anywhere, adds its
    own contribution and nothing else (its unit is new, so the bounded aggregate is additive
    over units).  ``where[j]`` is the line before which ``extra[j]`` goes (≥ 1).

    Under ``csv = "lines"`` for any bytes without LF.  Under ``rfc4180`` for any text with an
    even number of quotes — LFs and CRLFs anywhere in it, so it may be several records: what
    a correct writer writes is balanced, whatever the fields hold, and then no text can move
    the record boundaries of the others (the writer assumption, csv_format)."""
    out: list = []
    if mode == "rfc4180":
        assert all(x.count(b'"') % 2 == 0 for x in extra), extra
    if not final:  # only before a line: then every inserted line ends with an LF
        where = [min(at, len(BASE) - 1) for at in where]
    lines = list(BASE)
    for line, at in sorted(zip(extra, where, strict=True), key=lambda t: -t[1]):
        lines.insert(at, line)
    base_path = write(tmp_path / "base.csv", BASE, final)
    full = write(tmp_path / "full.csv", lines, final)
    own = write(tmp_path / "own.csv", [HEADER, *extra])
    specs = (spec_of(p, **PROPERTY, source={"csv": mode}) for p in (base_path, full, own))
    base, agg, alone = (run(spec, engine, out) for spec in specs)
    np.testing.assert_array_equal(agg.counts, base.counts + alone.counts)
    np.testing.assert_allclose(agg.sums, base.sums + alone.sums, rtol=1e-12, atol=1e-12)
    for key in ROWS:
        assert getattr(agg.rows, key) == getattr(base.rows, key) + getattr(alone.rows, key), key
    return out


def distinct_units(lines: list[bytes]) -> list[bytes]:
    """The lines whose unit (when they are records) is not another line's or a base unit."""
    seen = {f"base{i}" for i in range(len(BASE))}
    kept = []
    for line in lines:
        rec = csv_format.parse_record(line.removesuffix(b"\r"), ",", 3)
        if rec is not None and rec[0]:
            if rec[0] in seen:
                continue
            seen.add(rec[0])
        kept.append(line)
    return kept


@pytest.mark.slow
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(extra_lines(), st.integers(1, len(BASE)), st.booleans())
def test_one_line_adds_its_own_contribution(
    tmp_path: Path, line: bytes, at: int, final: bool
) -> None:
    check_one_line_adds_its_own_contribution(tmp_path, ENGINE, [line], [at], final)


def balanced(pieces: list[bytes], breaks: list[bytes]) -> bytes:
    """``pieces`` joined by the line ``breaks``, a quote added at the end if the quotes are
    odd: a text of an even number of quotes, as a correct writer's records are."""
    text = pieces[0] + b"".join(b + p for b, p in zip(breaks, pieces[1:], strict=False))
    return text + b'"' if text.count(b'"') % 2 else text


def extra_records() -> st.SearchStrategy[bytes]:
    """Texts of an even number of quotes made of :func:`extra_lines` joined by LF or CRLF."""
    pieces = st.lists(extra_lines(), min_size=1, max_size=3)
    breaks = st.lists(st.sampled_from([b"\n", b"\r\n", b'"\n"', b'\n"']), max_size=2)
    return st.builds(balanced, pieces, breaks)


@pytest.mark.slow
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(extra_records(), st.integers(1, len(BASE)), st.booleans())
def test_one_balanced_text_adds_its_own_contribution(
    tmp_path: Path, text: bytes, at: int, final: bool
) -> None:
    check_one_line_adds_its_own_contribution(tmp_path, ENGINE, [text], [at], final, "rfc4180")


def random_extra_records(seed: int, k: int) -> tuple[list[bytes], list[int]]:
    """``k`` balanced texts drawn like :func:`extra_records` (for the Spark test), with
    distinct units among their records, and where they go."""
    rng = random.Random(seed)
    texts: list[bytes] = []
    seen = {f"base{i}" for i in range(len(BASE))}
    while len(texts) < k:
        pieces = [random_line(rng) for _ in range(rng.randint(1, 3))]
        breaks = [rng.choice([b"\n", b"\r\n", b'"\n"', b'\n"']) for _ in pieces[1:]]
        text = balanced(pieces, breaks)
        units = [r[0] for r in map(_record3, csv_format.split_records(text)) if r and r[0]]
        if seen.isdisjoint(units) and len(set(units)) == len(units):
            seen.update(units)
            texts.append(text)
    return texts, [rng.randint(1, len(BASE)) for _ in texts]


def _record3(text: bytes) -> list[str | None] | None:
    return csv_format.parse_record(text, ",", 3)


def random_extra_lines(seed: int, k: int) -> tuple[list[bytes], list[int]]:
    """``k`` lines drawn like the property test's, with distinct units, and where they go."""
    rng = random.Random(seed)
    extra = distinct_units([random_line(rng) for _ in range(3 * k)])[:k]
    return extra, [rng.randint(1, len(BASE)) for _ in extra]


def test_many_lines_add_their_own_contributions(tmp_path: Path) -> None:
    extra, where = random_extra_lines(7, 40)
    check_one_line_adds_its_own_contribution(tmp_path, ENGINE, extra, where, True)


def test_many_balanced_texts_add_their_own_contributions(tmp_path: Path) -> None:
    extra, where = random_extra_records(7, 40)
    check_one_line_adds_its_own_contribution(tmp_path, ENGINE, extra, where, True, "rfc4180")


# ------------------------------------------------------------ which writer made it


def _shape(data: bytes) -> csv_format.CsvShape:
    """csv_format.csv_shape of one file, by the pure-Python reading."""
    lines = csv_format.split_lines(data)
    records = csv_format.split_records(data)
    spanning = [r for r in records if b"\n" in r]
    body = data.removeprefix(csv_format.BOM)
    return csv_format.CsvShape(
        files=1,
        lines=len(lines),
        odd_quote_lines=sum(x.count(b'"') % 2 for x in lines),
        records=len(records),
        spanning_records=len(spanning),
        spanning_lines=sum(r.count(b"\n") + 1 for r in spanning),
        unterminated_files=body.count(b'"') % 2,
    )


@pytest.mark.slow
def test_the_csv_shape_is_the_reference(tmp_path: Path) -> None:
    rng = random.Random(3)
    atoms = [b"a", b",", b'"', b'"', b"\n", b"\n", b"\r", csv_format.BOM, b'""', b"\r\n"]
    path = tmp_path / "s.csv"
    total = csv_format.CsvShape()
    for _ in range(600):
        data = b"".join(rng.choice(atoms) for _ in range(rng.randint(0, 30)))
        path.write_bytes(data)
        chunk = rng.choice([1, 2, 3, 5, 64, 1 << 16])
        assert csv_format.csv_shape([str(path)], chunk) == _shape(data), (data, chunk)
        total = total + _shape(data)
    assert total.spanning_records > 100 and total.unterminated_files > 100


@pytest.mark.slow
def test_check_reports_which_writer_made_the_file(tmp_path: Path) -> None:
    from dpgauss.release.check import check_source

    rows = [["uid", "key", "note"]]
    rows += [[f"u{i}", str(i % 10), GHOST_NOTE if i % 40 == 7 else "n"] for i in range(100)]
    path = write_csv(tmp_path / "rfc.csv", rows)
    result = check_source(spec_of(path))
    assert result.csv_mode == "rfc4180" and result.rows.units == 100
    assert result.csv == csv_format.CsvShape(1, 101 + 3 * 51, 6, 101, 3, 3 * 52, 0)
    assert result.as_dict()["csv"]["spanning_records"] == 3
    text = result.text()
    assert "3 records span lines (156 lines); 6 lines have an odd number of quotes" in text
    assert "quoted line breaks of an RFC 4180 writer" in text
    lines = check_source(spec_of(path, source=LINES))
    assert lines.csv == result.csv and lines.csv_mode == "lines"
    assert "Then csv = 'rfc4180' reads them as records" in lines.text()
    # A writer that does not escape quotes: a stray quote, the file ends inside it.
    stray = write(tmp_path / "stray.csv", [b"uid,key,note", b'a,1,5" tall', b"b,2,x"])
    result = check_source(spec_of(stray))
    assert result.csv == csv_format.CsvShape(1, 3, 1, 2, 1, 2, 1)
    assert result.rows.malformed_lines == 1 and "A writer that does not escape quotes" in (
        result.text()
    )
    assert check_source(spec_of(stray, source=LINES)).rows.units == 1  # 'a,1,5" tall' alone
    # Parquet has no CSV shape.
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    pq.write_table(pa.table({"uid": ["a"], "key": [1]}), tmp_path / "t.parquet")
    parquet = check_source(spec_of(tmp_path / "t.parquet"))
    assert parquet.csv is None and parquet.as_dict()["csv"] is None
