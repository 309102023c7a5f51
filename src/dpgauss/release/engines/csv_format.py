r"""The CSV format of dpgauss: RFC 4180 records or lines, the same in both engines.

This module is the single statement of how a CSV source is read.  The DuckDB engine and the
Spark engine take their rules, regular expressions and SQL from here, and
``tests/release/engines/test_csv_format.py`` checks both against the pure-Python reading below
(:func:`split_records`, :func:`split_lines`, :func:`parse_fields`, :func:`parse_record`).

Which writer made the file: ``[source] csv``
--------------------------------------------
The privacy rule: one privacy unit's records may only change that unit's contribution —
never another unit's records, never how other records are parsed, never a switch decided on
the whole source.  RFC 4180 lets a quoted field hold line breaks, and that cannot be had
together with robustness to an unterminated quote.  The same bytes ::

    eve,1,"hi
    ghost0,0,x
    bye"

are *one* record of unit ``eve`` when an RFC-4180 writer quoted a field holding two line
breaks, and *three* lines — ``eve``'s record with an unterminated quote, a record of unit
``ghost0``, and a third line — when a writer that does not escape quotes wrote a free-text
field ``"hi``.  A reader sees only the bytes.  Reading them as one record, the second
dataset loses ``ghost0``'s record because of ``eve``'s line: ``eve`` changed another unit's
contribution.  Reading them as three lines, the first dataset's single record of ``eve``
contributes as a record of ``ghost0`` (and of every other "unit" its field text names): more
than one unit's worth.  No reader is within the sensitivity of both neighbours, so the reader
cannot be chosen from the bytes: **the spec says which writer made the file**.

* ``csv = "rfc4180"`` (the default): the file was written by a writer that quotes as RFC 4180
  says — Python's ``csv``, ``pandas.to_csv``, DuckDB's ``COPY``, PostgreSQL's ``COPY … CSV``,
  Spark, spreadsheet programs: every field holding the delimiter, a quote, CR or LF is
  quoted, and every quote inside it doubled.  A quoted field may then hold line breaks, and
  a record is a run of lines whose quotes balance (rule 1).  **The trust assumption**: the
  data owner asserts that the writer quotes correctly.  Then every record's text has an even
  number of quotes, whatever its unit put in its fields, and no record can move another
  record's boundaries: one unit's records change that unit's contribution only.  If the
  assumption is false — a record with an unbalanced quote, written by a writer that does not
  escape quotes — that record swallows the following lines up to the next unbalanced quote
  (or to the end of the file): other units' records are lost, and the rule above is broken.
  ``dpgauss check`` (:mod:`dpgauss.release.check`) counts the records that span lines and the
  lines with an odd number of quotes, so that the owner can see which writer made the file.
* ``csv = "lines"``: for writers that never put a line break in a field (or escape it, e.g.
  as ``\n``), and for files whose writer is not known to quote correctly.  Every line is a
  record text, so one line's bytes can only ever affect that line and a malformed line is
  exactly one dropped (and counted) line, whatever it holds.  A field holding a line break is
  then read as several lines (its first line usually malformed, the following lines read as
  whatever they look like: a 50-line note of one unit added 50 "units" in the regression
  test), which is why it is not the default.

The format
----------
1. **Record texts.**  A UTF-8 byte order mark (``EF BB BF``) at the very start of a file is
   removed (as Hadoop's line reader under Spark does).  The file's *lines* are its pieces
   between LF bytes (``0x0A``); a last piece without LF is a line, nothing after the final LF
   is a line (an empty file has no lines); CR (``0x0D``) never ends a line.

   * ``lines``: every LF ends a record, so each line is a record text (:func:`split_lines`).
   * ``rfc4180``: an LF ends a record iff the number of quotes (``0x22``) before it in the
     file (after the byte order mark) is even — it is outside every quoted field; an LF
     inside quotes is data.  So a record is a run of consecutive lines whose quotes balance
     (:func:`split_records`).  **An unterminated quote**: if the file holds an odd number of
     quotes, the lines from the last record end to the end of the file are one record text
     (it has an odd number of quotes, so it is malformed by rule 3): the rest of the file is
     one malformed record.

   A record text is the bytes from its first byte to the LF that ends its last line (or to
   the end of the file), that LF excluded; one CR immediately before that end is removed
   (CRLF files read as LF files; a CR before an LF inside quotes is data, and so is every
   other CR).  Both modes give the same record texts on a file in which no LF is inside
   quotes.  In what follows, "record" is a record text.
2. **Text.**  A record that is not valid UTF-8, or that contains U+FFFD (the replacement
   character), is malformed.  (So a reader that replaces invalid bytes by U+FFFD reads the
   same records.  Spark 4's text reader in fact keeps invalid bytes as they are; both engines
   test validity on the bytes.)
3. **Fields.**  Fields are separated by the one-character delimiter ``d`` (not ``"``, CR, LF
   or U+FFFD; :func:`delimiter_problem`).  A field is *quoted* — ``"`` … ``"`` with every
   inner quote doubled; it may contain ``d``, CR and LF (an LF only under ``rfc4180``: under
   ``lines`` no record holds one) — or *unquoted*: any characters except ``d``, ``"`` and LF.
   A record text is a record iff it consists of exactly ``n`` fields, ``n`` the number of
   columns (:func:`record_regex`).  Anything else — an unterminated quote, a quote inside an
   unquoted field, text after a closing quote, too few or too many fields, an empty record
   when ``n > 1`` — is one malformed record.
4. **Values.**  An unquoted empty field is NULL; a quoted field is its content with ``""``
   read as ``"`` (so ``""`` is the empty string); nothing is trimmed.  Every column is text.
5. **Header.**  With ``[source] header = true`` the column names are the fields of the first
   record of the first file (the paths and globs expanded and sorted, :func:`expand_paths`);
   they must be a record of their own length with non-empty, distinct names
   (:func:`parse_header`).  Every record that is byte-identical (after rule 1) to that header
   record is not a record: it is dropped, and not counted as malformed.  This is a local rule
   (Spark's line reader cannot know a line's position in its file), the same in both
   engines.  Before anything is charged, ``describe()`` checks for local files that the first
   record of every file is that same header record (:func:`read_header`).  With
   ``header = false``, ``[source] columns`` names the columns (required); with
   ``header = true`` it may be given and must equal the header.
6. **Record priority.**  With ``[bounds] record_columns`` unset, a record's content — hashed
   into its sampling priority — is its record text (after rule 1): a function of the record
   alone.

How the engines run it
----------------------
Both engines fold the record first: :func:`fold_sql` replaces every ``""``, left to right, by
an LF (``P`` below), and they match the folded record against :func:`folded_record_regex`,
whose only repetitions are of single characters.  Under ``lines`` no record holds an LF, so
P is unambiguous.  Under ``rfc4180`` a quoted field may hold LFs: the fold first replaces
each of them by U+FFFD (``R``; no record holds one, rule 2, and the test for U+FFFD is made
on the unfolded record), the regex excludes R from unquoted fields (an LF is never in one),
and :func:`unquote_sql` turns R back into LF.  The plain grammar :func:`record_regex`
repeats a group once per doubled quote (or, written as ``(?:[^"]|"")*``, once per
character), and java.util.regex recurses once per repetition: a quoted field of 20,000
characters overflowed the JVM's stack and killed Spark's driver in local mode (measured with
Spark 4) — one unit's record would have stopped every release.  The folding is exact
(``tests/release/engines/test_csv_format.py`` checks it on random records): after it no ``"`` is
followed by ``"``, an even run of ``2k`` quotes became ``P^k``, an odd run ``P^k"``; so a
quoted field becomes ``P^k"Y"`` (``Y`` without quotes) or ``P^k`` (``k ≥ 1``, a field of
quotes only), an unquoted field stays free of quotes, P and R, and conversely each such
folded field unfolds (R → LF, P → ``""``) to a valid field.  (A one-byte P also lets RE2 use
its fast one-pass matcher for extractions of up to four fields.)  The regexes use only
constructs with the same meaning in RE2 (DuckDB) and java.util.regex (Spark): ``\A``, ``\z``
(not ``^``/``$``: Java's ``$`` matches before a final line terminator), character classes,
alternation, non-capturing and capturing groups, ``*``, ``+``, ``?``, and characters written
as ``\x{HEX}`` (the delimiter too, so that no delimiter is special).  A field's value is
:func:`unquote_sql` of its folded text (the same SQL text in DuckDB and Spark).  A record
whose delimiters all separate fields is just its segments between delimiters: for the
records the reader decided, the DuckDB engine takes them with ``string_split`` instead of a
regex (:func:`segment_value_sql`; the same values, much faster).

The DuckDB engine does not use DuckDB's CSV reader (its sniffer, and its treatment of a bare
CR as a line break, break rule 1): :func:`line_reader` streams the record texts of the files
as Arrow record batches, chunk by chunk (never a whole file in memory): the record as text
(NULL when it is not valid UTF-8) and its kind — numpy decides the records whose fields are
unquoted or quoted without inner quotes or delimiters, which are most records of most files
— and DuckDB tests the other records against the regex and extracts the fields in SQL.
Under ``rfc4180`` the record ends are found as parallel CSV readers find them, from quote
parity: in each chunk numpy finds the quotes and the LFs, and an LF ends a record iff the
quotes before it — in the chunk (a running count over its LFs and quotes in order) plus the
parity carried from the earlier chunks — are even.  A chunk is cut after its last record end
and the rest carried to the next, with its parity: a record longer than a chunk is assembled
once (linear time, however many lines it spans), and only such a record is ever held whole.
On 20 M rows this cost 1.2-1.3× the CPU time of the line reading, and 1.08× for a whole
bounded count (``python benchmarks/bench_csv.py --rows 20000000``, ``docs/benchmarks.md``).
It reads local files (``.gz`` and ``.bz2`` decompressed).

The Spark engine reads the lines with ``spark.read.option("lineSep", "\n").text(files)``,
which splits at LF only, keeps CR and invalid bytes as they are, removes the byte order mark
at the start of a file and decompresses by Hadoop's codecs.  Under ``lines`` each line is a
record: it removes the CR and tests rule 2 in SQL.  Under ``rfc4180`` it stitches lines into
records: each line is tagged with its file (``_metadata.file_path``), the start of its file
split (``_metadata.file_block_start``) and ``monotonically_increasing_id()`` (increasing in
file order within a split, as the split is read in order), which together order the lines of
a file; a window over each file's lines in that order sums their quotes, so a line ends a
record iff the running count is even, and the record index of a line is the number of record
ends before it.  The lines of single-line records (most of them) pass through; the others are
grouped by (file, record index) and joined by LF in their order.  **Scale limits**: the window
is one task per file, sorting that file's lines (Spark spills the sort to disk, so memory is
not the limit, but the record boundaries of one file are found by one core), after a shuffle
of every line by file.  Parallelism comes from many files: split a large source into many
files, or write Parquet.  ``csv = "lines"`` reads every split in parallel, as before.
"""

from __future__ import annotations

import bz2
import glob
import gzip
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, astuple, dataclass
from typing import IO, Any, cast

import numpy as np

from ...errors import CsvError

__all__ = [
    "BOM",
    "GENERAL",
    "MALFORMED",
    "MODES",
    "NEWLINE",
    "PLACEHOLDER",
    "RECORD",
    "REPLACEMENT",
    "CsvError",
    "CsvShape",
    "check_mode",
    "csv_shape",
    "delimiter_problem",
    "expand_paths",
    "first_line",
    "first_record",
    "fold_sql",
    "folded_record_regex",
    "is_remote",
    "line_batches",
    "line_reader",
    "local_source",
    "open_file",
    "parse_fields",
    "parse_header",
    "parse_record",
    "read_header",
    "record_regex",
    "resolve_columns",
    "segment_value_sql",
    "split_lines",
    "split_records",
    "unquote_sql",
]

BOM = b"\xef\xbb\xbf"
REPLACEMENT = "\ufffd"  # U+FFFD: a line holding it is malformed (rule 2)
PLACEHOLDER = "\n"  # stands for `""` in a folded record (its LFs are NEWLINE by then)
NEWLINE = REPLACEMENT  # stands for an LF in a folded rfc4180 record: no record holds U+FFFD
#: The values of ``[source] csv``: which writer made the file (module docstring).
MODES = ("rfc4180", "lines")
#: File name endings read as compressed files by the DuckDB line reader.
DECOMPRESSED = (".gz", ".bz2")
#: Other compression endings: refused by the DuckDB line reader (Spark decompresses most).
COMPRESSED = (".zst", ".zstd", ".lz4", ".snappy", ".deflate", ".xz", ".lzma", ".zip", ".br")
CHUNK_BYTES = 4 << 20  # the DuckDB line reader's read size


def check_mode(mode: object) -> str:
    """``mode`` if it is one of :data:`MODES`, else ``ValueError``."""
    if mode not in MODES:
        raise ValueError(f"csv mode must be one of {', '.join(map(repr, MODES))}; got {mode!r}")
    return mode


def delimiter_problem(delimiter: object) -> str | None:
    """Why ``delimiter`` cannot be a delimiter of this format, or None if it can."""
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        return "a single character"
    if delimiter in ('"', "\r", "\n"):
        return "a single character other than a double quote, CR or LF"
    if delimiter == REPLACEMENT or "\ud800" <= delimiter <= "\udfff":
        return "a single character other than U+FFFD or a surrogate"
    return None


# ------------------------------------------------------------------------ reference


def split_lines(data: bytes) -> list[bytes]:
    """The lines of a file's bytes (rule 1): BOM removed, split at LF, one CR stripped."""
    if data.startswith(BOM):
        data = data[len(BOM) :]
    if not data:
        return []
    parts = data.split(b"\n")
    if parts[-1] == b"":
        parts.pop()  # nothing after the final LF is a line
    return [p[:-1] if p.endswith(b"\r") else p for p in parts]


def split_records(data: bytes, mode: str = "rfc4180") -> list[bytes]:
    """The record texts of a file's bytes (rule 1): under ``lines`` its lines
    (:func:`split_lines`); under ``rfc4180`` its runs of lines whose quotes balance, joined by
    their LFs, one CR stripped at the end of each — the rest of a file with an odd number of
    quotes being one record."""
    if check_mode(mode) == "lines":
        return split_lines(data)
    if data.startswith(BOM):
        data = data[len(BOM) :]
    if not data:
        return []
    parts = data.split(b"\n")
    if parts[-1] == b"":
        parts.pop()  # nothing after the final LF is a line
    records: list[bytes] = []
    run: list[bytes] = []
    quotes = 0
    for part in parts:
        run.append(part)
        quotes += part.count(b'"')
        if quotes % 2 == 0:  # the LF after this line is outside quotes: a record end
            records.append(b"\n".join(run))
            run, quotes = [], 0
    if run:  # an unterminated quote: the rest of the file is one record
        records.append(b"\n".join(run))
    return [r[:-1] if r.endswith(b"\r") else r for r in records]


def _py_char(ch: str) -> str:
    return f"\\U{ord(ch):08x}"


_PY_FIELDS: dict[str, re.Pattern[str]] = {}


def _py_field(delimiter: str) -> re.Pattern[str]:
    pat = _PY_FIELDS.get(delimiter)
    if pat is None:
        d = _py_char(delimiter)
        pat = re.compile(rf'"[^"]*"(?:"[^"]*")*|[^{d}"\n]*')
        _PY_FIELDS[delimiter] = pat
    return pat


def _value(text: str) -> str | None:
    if text == "":
        return None
    if text.startswith('"'):
        return text[1:-1].replace('""', '"')
    return text


def parse_fields(line: str, delimiter: str = ",") -> list[str | None] | None:
    """The values of a decoded record's fields (rules 3-4), or None if it is no sequence of
    fields (an unterminated quote, a quote in an unquoted field, text after a closing quote,
    an LF outside quotes).

    Does not apply rule 2 (:func:`parse_record` does).  A field's extent is decided by its
    first character, so reading the fields greedily from the left is exact.
    """
    pat = _py_field(delimiter)
    fields: list[str | None] = []
    pos = 0
    while True:
        m = pat.match(line, pos)
        assert m is not None  # the unquoted alternative matches the empty string
        fields.append(_value(m.group()))
        pos = m.end()
        if pos == len(line):
            return fields
        if line[pos] != delimiter:
            return None
        pos += 1


def parse_record(raw: bytes, delimiter: str, n: int) -> list[str | None] | None:
    """The ``n`` values of one record text (bytes after rule 1), or None if it is
    malformed.  The same in both modes: they differ in their record texts only."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if REPLACEMENT in line:
        return None
    fields = parse_fields(line, delimiter)
    if fields is None or len(fields) != n:
        return None
    return fields


# ------------------------------------------------------------- what the engines run


def _char(ch: str) -> str:
    """``ch`` as a regex character: ``\\x{HEX}`` means the same in RE2 and Java, in and out
    of a character class, whatever the character."""
    return f"\\x{{{ord(ch):X}}}"


def _check(delimiter: str, n: int) -> None:
    problem = delimiter_problem(delimiter)
    if problem is not None:
        raise ValueError(f"delimiter must be {problem}; got {delimiter!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1; got {n!r}")


def record_regex(delimiter: str, n: int) -> str:
    r"""The grammar of a record of ``n`` fields (rule 3), for reading, not for running:
    ``\A F (d F){n-1} \z`` with ``F = (?:"[^"]*"(?:"[^"]*")*|[^d"\n]*)`` (both modes)."""
    _check(delimiter, n)
    d, lf = _char(delimiter), _char("\n")
    field = f'(?:"[^"]*"(?:"[^"]*")*|[^{d}"{lf}]*)'
    return r"\A" + d.join([field] * n) + r"\z"


def fold_sql(expr: str, mode: str = "lines") -> str:
    """SQL (DuckDB and Spark alike) that folds the record ``expr``: every ``""`` → LF, after
    (``rfc4180``) every LF → U+FFFD (:data:`NEWLINE`)."""
    if check_mode(mode) == "rfc4180":
        expr = f"replace({expr}, chr(10), '{NEWLINE}')"
    return f"replace({expr}, '\"\"', chr(10))"


def folded_record_regex(
    delimiter: str, n: int, capture: Iterable[int] = (), mode: str = "lines"
) -> str:
    r"""The regex a record folded by :func:`fold_sql` in ``mode`` matches iff the record
    is a record of ``n`` fields (given rule 2), each field ``(?:P*(?:"[^"]*")?|[^dP"]+)``
    with ``P`` = LF, or ``(?:P*(?:"[^"]*")?|[^dP"R]+)`` with ``R`` = U+FFFD, an LF of the
    record, under ``rfc4180`` (module docstring).

    The fields whose 0-based indices are in ``capture`` are capturing groups, in order: an
    engine extracts group ``j`` for the ``j``-th of them (DuckDB's ``regexp_extract`` with a
    list of names, Spark's ``regexp_extract(…, j)``), and :func:`unquote_sql` gives its value.
    """
    _check(delimiter, n)
    wanted = set(capture)
    if any(not 0 <= i < n for i in wanted):
        raise ValueError(f"capture must hold field indices in [0, {n}); got {sorted(wanted)}")
    d, p = _char(delimiter), _char(PLACEHOLDER)
    r = _char(NEWLINE) if check_mode(mode) == "rfc4180" else ""
    body = f'{p}*(?:"[^"]*")?|[^{d}{p}"{r}]+'
    fields = [f"({body})" if i in wanted else f"(?:{body})" for i in range(n)]
    return r"\A" + d.join(fields) + r"\z"


def segment_value_sql(expr: str) -> str:
    """SQL (DuckDB and Spark alike) for the value of a field ``expr`` that is a whole segment
    of a record the reader found to be a RECORD: unquoted text, or ``"X"`` with ``X`` free
    of quotes (an empty one is NULL, ``""`` the empty string; ``X`` may hold LFs)."""
    return (
        f"CASE WHEN {expr} = '' THEN NULL WHEN left({expr}, 1) = '\"' THEN "
        f"substr({expr}, 2, length({expr}) - 2) ELSE {expr} END"
    )


def unquote_sql(expr: str, mode: str = "lines") -> str:
    """SQL (DuckDB and Spark alike) for the value of a field ``expr`` folded in ``mode``
    (rule 4).

    A folded field starting with ``"`` or LF was quoted: unfold it (LF → ``""``), drop the
    outer quotes, read ``""`` as ``"`` and (``rfc4180``) U+FFFD as LF; an empty one was an
    unquoted empty field (NULL); any other is unquoted text, returned as it is.
    """
    orig = f"replace({expr}, chr(10), '\"\"')"
    value = f"replace(substr({orig}, 2, length({orig}) - 2), '\"\"', '\"')"
    if check_mode(mode) == "rfc4180":
        value = f"replace({value}, '{NEWLINE}', chr(10))"
    return (
        f"CASE WHEN {expr} = '' THEN NULL WHEN left({expr}, 1) IN ('\"', chr(10)) THEN "
        f"{value} ELSE {expr} END"
    )


# -------------------------------------------------------------------------- files

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_remote(path: str) -> bool:
    """Whether ``path`` is a URL of a non-local file system (``s3://``, ``hdfs://``, …)."""
    return _SCHEME.match(path) is not None and not path.lower().startswith("file://")


def _local(path: str) -> str:
    """A local path or ``file:`` URL as a path."""
    if path.lower().startswith("file:"):
        path = path[len("file:") :]
        if path.startswith("//"):
            path = path[2:]  # file:///x → /x (no authority); file:/x → /x
    return os.path.expanduser(path)


def expand_paths(patterns: Sequence[str]) -> list[str]:
    """The files of the local paths and globs ``patterns``, sorted, without repeats.

    Globs are Python's (``*``, ``?``, ``[…]``; ``**`` matches directories recursively) and
    match files only.  A pattern that matches no file, or a path that is a directory, is a
    :class:`CsvError` naming it; so is a remote URL (``s3://…``).
    """
    files: set[str] = set()
    for pattern in patterns:
        if is_remote(pattern):
            raise CsvError(f"{pattern!r} is not a local file (the DuckDB engine reads local CSV)")
        path = _local(pattern)
        if any(c in path for c in "*?["):
            found = [p for p in glob.glob(path, recursive=True) if os.path.isfile(p)]
        elif os.path.isdir(path):
            raise CsvError(f"{pattern!r} is a directory (give a glob such as 'dir/*.csv')")
        else:
            found = [path] if os.path.isfile(path) else []
        if not found:
            raise CsvError(f"no file matches {pattern!r}")
        files.update(found)
    return sorted(files)


def open_file(path: str) -> IO[bytes]:
    """``path`` opened for binary reading, decompressed if it ends in ``.gz`` or ``.bz2``."""
    low = path.lower()
    if low.endswith(COMPRESSED):
        raise CsvError(f"{path}: compressed CSV is read only as .gz or .bz2")
    try:
        if low.endswith(".gz"):
            return gzip.open(path, "rb")  # type: ignore[return-value]  # typeshed: GzipFile is no IO[bytes]
        if low.endswith(".bz2"):
            return bz2.open(path, "rb")
        return open(path, "rb")
    except OSError as exc:
        raise CsvError(f"cannot read {path}: {exc.strerror or exc}") from None


def first_record(path: str, mode: str = "lines", limit: int = 1 << 24) -> bytes | None:
    """The first record text of a file in ``mode`` (rule 1), or None for a file without
    lines; :class:`CsvError` if it is longer than ``limit`` bytes."""
    what = "line" if check_mode(mode) == "lines" else "record"
    blocks: list[bytes] = []
    size, parity, cut = 0, 0, -1
    with open_file(path) as f:
        try:
            while cut < 0:
                block = f.read(1 << 16)
                if not block:
                    break
                arr = np.frombuffer(block, dtype=np.uint8)
                if mode == "lines":
                    ends = np.flatnonzero(arr == 10)
                else:
                    ends = _lf_and_ends(arr, parity)[1]
                if ends.size:
                    cut = size + int(ends[0])
                else:
                    parity ^= _quote_parity(arr)
                blocks.append(block)
                size += len(block)
                if (cut if cut >= 0 else size) > limit:
                    raise CsvError(f"{path}: the first {what} is longer than {limit} bytes")
        except (OSError, EOFError) as exc:
            raise CsvError(f"cannot read {path}: {exc}") from None
    data = b"".join(blocks)
    records = split_records(data if cut < 0 else data[: cut + 1], mode)
    return records[0] if records else None


def first_line(path: str, limit: int = 1 << 24) -> bytes | None:
    """The first line of a file (rule 1), or None for a file without lines."""
    return first_record(path, "lines", limit)


def parse_header(line: bytes | None, delimiter: str, where: str) -> tuple[str, ...]:
    """The column names in a header record (rule 5); :class:`CsvError` naming ``where`` if
    they are not valid UTF-8 fields with non-empty, distinct names."""
    if line is None:
        raise CsvError(f"{where}: the file has no header line ([source] header = true)")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise CsvError(f"{where}: the header line is not valid UTF-8") from None
    fields = None if REPLACEMENT in text else parse_fields(text, delimiter)
    if fields is None:
        raise CsvError(
            f"{where}: the header line is not a row of fields "
            f"(delimiter {delimiter!r}): {_short(text)!r}"
        )
    if any(not f for f in fields):
        raise CsvError(f"{where}: the header has an empty column name: {_short(text)!r}")
    names = cast("list[str]", fields)  # no field is None or empty (checked above)
    if len(set(names)) != len(names):
        dup = sorted({f for f in names if names.count(f) > 1})
        raise CsvError(f"{where}: the header repeats the column names {dup}")
    return tuple(names)


def _short(text: str) -> str:
    return text if len(text) <= 200 else text[:197] + "..."


def read_header(
    files: Sequence[str], delimiter: str, *, check_all: bool = True, mode: str = "lines"
) -> tuple[tuple[str, ...], bytes]:
    """(column names, header record) of local CSV files with a header (rule 5).

    The header is the first record of ``files[0]`` (in ``mode``).  With ``check_all``, every
    other file's first record must be byte-identical to it (after rule 1; a file without
    lines is fine); else :class:`CsvError` naming the file — its names, when they differ, or
    that the line only spells the same names differently (the header is recognised by its
    bytes, so such a line would be read as a record).
    """
    if not files:
        raise CsvError("no CSV file to read")
    line = first_record(files[0], mode)
    names = parse_header(line, delimiter, files[0])
    assert line is not None
    for path in files[1:] if check_all else ():
        other = first_record(path, mode)
        if other is None or other == line:
            continue
        try:
            theirs: tuple[str, ...] | str = parse_header(other, delimiter, path)
        except CsvError as exc:
            theirs = str(exc)
        if theirs == names:
            raise CsvError(
                f"{path}: its header line spells the column names differently from the "
                f"header of {files[0]} (the header line must be byte-identical in every file)"
            )
        raise CsvError(
            f"{path}: its header {list(theirs) if isinstance(theirs, tuple) else theirs} "
            f"differs from the header of {files[0]}: {list(names)}"
        )
    return names, line


def resolve_columns(
    header: tuple[str, ...] | None, columns: Sequence[str] | None, where: str
) -> tuple[str, ...]:
    """The column names: the header's (checked against ``[source] columns`` if given), or
    ``columns`` when the files have no header (then required)."""
    if header is None:
        if columns is None:
            raise CsvError(
                "[source] header = false needs [source] columns = [...] (the column names)"
            )
        return tuple(columns)
    if columns is not None and tuple(columns) != header:
        raise CsvError(
            f"[source] columns {list(columns)} must equal the header of {where}: {list(header)}"
        )
    return header


def local_source(
    patterns: Sequence[str],
    delimiter: str,
    header: bool,
    columns: Sequence[str] | None,
    *,
    check_all: bool = True,
    mode: str = "lines",
) -> tuple[list[str], tuple[str, ...], bytes | None]:
    """(files, column names, header record or None) of a local CSV source (rule 5)."""
    files = expand_paths(patterns)
    if not header:
        return files, resolve_columns(None, columns, ""), None
    names, line = read_header(files, delimiter, check_all=check_all, mode=mode)
    return files, resolve_columns(names, columns, files[0]), line


# ----------------------------------------------------------- the DuckDB line reader


#: Record kinds of :func:`line_batches`: a record, a malformed one, or one for the regex.
RECORD, MALFORMED, GENERAL = 0, 1, 2


def _quote_parity(arr: np.ndarray) -> int:
    """The number of quotes in ``arr``, mod 2."""
    return int(np.count_nonzero(arr == 34)) & 1


def _lf_and_ends(arr: np.ndarray, parity: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(the positions of the LFs of ``arr``, those of them that end an rfc4180 record).

    An LF ends a record (rule 1) iff the quotes before it are even: ``parity`` (the quotes
    before ``arr``, mod 2) plus those of ``arr`` before it.  One vectorised pass: the
    *events* (LFs and quotes, in order) and their running count of quotes, read at each
    LF (an LF is no quote, so the count at it is the count before it)."""
    events = np.flatnonzero((arr == 10) | (arr == 34))
    is_lf = arr[events] == 10
    lf = events[is_lf]
    if lf.size == events.size:  # no quote: every LF ends a record, or none does
        return lf, lf if parity == 0 else lf[:0]
    before = np.cumsum(~is_lf, dtype=np.int64)[is_lf]
    return lf, lf[((before + parity) & 1) == 0]


def _valid_utf8(arr: np.ndarray, starts: np.ndarray, ends: np.ndarray, high: np.ndarray) -> Any:
    """Which lines ``arr[starts[i]:ends[i]]`` are valid UTF-8 (``high``: the lines holding a
    byte ≥ 0x80; the others are ASCII).  One strict decode of the span of the non-ASCII lines
    (an LF or CR cannot continue a multi-byte sequence, so the span decodes iff every line
    does); after an error, the line holding it is invalid and decoding resumes at the next
    line, so the work stays linear however many lines are invalid."""
    import codecs

    valid = np.ones(starts.size, dtype=bool)
    lines = np.flatnonzero(high)
    if lines.size == 0:
        return valid
    view = memoryview(arr)  # type: ignore[arg-type]  # an ndarray is a buffer; its stubs say not
    pos, stop = int(starts[lines[0]]), int(ends[lines[-1]])
    while pos < stop:
        try:
            codecs.utf_8_decode(view[pos:stop], "strict", True)
            break
        except UnicodeDecodeError as exc:
            i = int(np.searchsorted(starts, pos + exc.start, side="right")) - 1
            valid[i] = False
            if i + 1 >= starts.size:
                break
            pos = int(starts[i + 1])
    return valid


def _kinds(
    arr: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    delimiter: str | None,
    n: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(kind, valid UTF-8) of each line ``arr[starts[i]:ends[i]]``.

    A line that is not valid UTF-8, or holds U+FFFD, is MALFORMED (rule 2).  For an ASCII
    delimiter (whose byte cannot occur inside a multi-byte character) the other lines are cut
    into *segments* at every delimiter byte.  If every segment is either free of quotes or
    exactly ``"X"`` with ``X`` free of quotes, the segments are the line's fields (rule 3: a
    delimiter inside quotes, or a doubled quote, would leave a segment of another shape), so
    the line is a RECORD iff it has ``n`` of them, else MALFORMED; its values are the
    segments, quotes stripped (:func:`segment_value_sql`).  Any other line is GENERAL, for the
    regex; so is every valid line when the delimiter is not ASCII (or not given)."""

    def per_line(positions: np.ndarray) -> np.ndarray:
        return np.searchsorted(positions, ends) - np.searchsorted(positions, starts)

    k, size = starts.size, arr.size
    high_bytes = np.flatnonzero(arr >= 128)
    high = per_line(high_bytes) > 0
    valid = _valid_utf8(arr, starts, ends, high)
    lead = high_bytes[(arr[high_bytes] == 0xEF) & (high_bytes + 2 < size)]
    fffd = lead[(arr[lead + 1] == 0xBF) & (arr[lead + 2] == 0xBD)]
    ok = valid & (per_line(fffd) == 0)
    kinds = np.full(k, MALFORMED, dtype=np.uint8)
    kinds[ok] = GENERAL
    if delimiter is None or ord(delimiter) >= 128:
        return kinds, valid
    byte = ord(delimiter)
    events = np.flatnonzero((arr == 34) | (arr == byte))  # quotes and delimiters, in order
    is_quote = arr[events] == 34
    quotes_upto = np.zeros(events.size + 1, dtype=np.int32)  # quotes among events[:j]
    np.cumsum(is_quote, dtype=np.int32, out=quotes_upto[1:])
    first = np.searchsorted(events, starts)
    count = np.searchsorted(events, ends) - first  # the events of line i: first[i] + range
    nq = quotes_upto[first + count] - quotes_upto[first]
    fields = count - nq + 1
    plain = ok & (nq == 0)
    kinds[plain] = np.where(fields[plain] == n, RECORD, MALFORMED)
    quoted = ok & (nq > 0) & (nq % 2 == 0)
    if not quoted.any():
        return kinds, valid
    # Every segment is quote-free or "X" (X quote-free) iff, counting the quotes of a line
    # from its start, each even-numbered quote opens a segment (at the line's start or after a
    # delimiter), each odd-numbered one closes it (before a delimiter or at the line's end), and
    # every delimiter is outside quotes (an even number of quotes before it in its line).
    odd = ((quotes_upto[:-1] - np.repeat(quotes_upto[first], count)) & 1).astype(bool)
    quotes = events[is_quote]
    at_start = np.zeros(size + 1, dtype=bool)
    at_start[starts] = True
    at_last = np.zeros(size + 1, dtype=bool)
    at_last[ends[ends > starts] - 1] = True
    opens = ~odd[is_quote]
    after_cut = (quotes > 0) & (arr[np.maximum(quotes - 1, 0)] == byte)
    before_cut = (quotes + 1 < size) & (arr[np.minimum(quotes + 1, size - 1)] == byte)
    bad_quote = np.where(opens, ~(at_start[quotes] | after_cut), ~(at_last[quotes] | before_cut))
    bad = np.concatenate([quotes[bad_quote], events[odd & ~is_quote]])
    misshaped = np.zeros(k, dtype=bool)
    misshaped[np.searchsorted(starts, bad, side="right") - 1] = True
    decided = quoted & ~misshaped
    kinds[decided] = np.where(fields[decided] == n, RECORD, MALFORMED)
    return kinds, valid


def _batch(
    pa: Any,
    arr: np.ndarray,
    lf: np.ndarray,
    skip: int,
    delimiter: str | None,
    n: int,
    every_lf: bool = True,
) -> Any:
    """One record batch of the record texts of ``arr``: record ``i`` ends at ``lf[i]``, an
    LF, except that ``lf[-1] == len(arr)`` marks a last record without LF; the first
    ``skip`` bytes (a byte order mark) are not data.  One CR before each end is stripped
    (rule 1).  ``every_lf``: whether every LF of ``arr`` is in ``lf`` (else the others are
    data, inside quotes)."""
    k, size = lf.size, arr.size
    starts = np.empty(k, dtype=np.int64)
    starts[0] = skip
    starts[1:] = lf[:-1] + 1
    ends = lf.astype(np.int64, copy=True)
    cr = (ends > starts) & (arr[np.maximum(ends - 1, 0)] == 13)
    ends -= cr
    offsets = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=offsets[1:])
    if skip == 0 and not cr.any() and every_lf:
        data = arr[arr != 10]  # only the LFs go
    else:
        keep = np.ones(size, dtype=bool)
        keep[lf[lf < size]] = False
        keep[ends[cr]] = False
        keep[:skip] = False
        data = arr[keep]
    assert data.size == offsets[-1]
    kinds, valid = _kinds(arr, starts, ends, delimiter, n)
    nulls = int(k - np.count_nonzero(valid))
    mask = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    text = pa.LargeStringArray.from_buffers(
        k, pa.py_buffer(offsets), pa.py_buffer(data), mask, nulls
    )
    return pa.RecordBatch.from_arrays([text, pa.array(kinds, type=pa.uint8())], names=["l", "k"])


def line_batches(
    files: Sequence[str],
    delimiter: str | None = None,
    n: int = 1,
    chunk_bytes: int = CHUNK_BYTES,
    mode: str = "lines",
) -> Iterator[Any]:
    """The record texts of ``files`` in ``mode`` (rule 1; under ``lines`` their lines) as
    Arrow record batches: ``l``, the record as text (``large_string``; NULL if it is not
    valid UTF-8), and ``k``, its kind for a record of ``n`` fields separated by
    ``delimiter``: ``RECORD``, ``MALFORMED``, or ``GENERAL`` — to be decided by the regex
    (see ``_kinds``).

    Each file is read in chunks of about ``chunk_bytes``.  A chunk is cut after its last
    record end and the rest carried to the next chunk; under ``rfc4180`` the carried bytes
    keep their quote parity, so that a record longer than a chunk is assembled once, when a
    later chunk ends it (only such a record is ever held whole; the work stays linear
    however many chunks and lines it spans).  The record ends, the kinds are numpy's,
    UTF-8 is checked by Python's strict decoder, and the records of a chunk are copied once
    into the batch's buffer, without their ending LF and stripped CR.
    """
    import pyarrow as pa

    rfc = check_mode(mode) == "rfc4180"

    def ends_of(arr: np.ndarray, parity: int) -> tuple[np.ndarray, np.ndarray]:
        """(LFs, record ends) of a chunk."""
        if rfc:
            return _lf_and_ends(arr, parity)
        lf = np.flatnonzero(arr == 10)
        return lf, lf

    for path in files:
        f = open_file(path)
        try:
            at_start = True
            pending: list[bytes] = []  # blocks of a record without its end yet
            parity = 0  # the quotes of the pending blocks, mod 2 (rfc4180)
            while True:
                try:
                    block = f.read(chunk_bytes)
                except (OSError, EOFError) as exc:
                    raise CsvError(f"cannot read {path}: {exc}") from None
                if not block:
                    break
                if pending:
                    arr = np.frombuffer(block, dtype=np.uint8)
                    if rfc:
                        ends = ends_of(arr, parity)[1]
                        if ends.size == 0:  # the pending record goes on
                            pending.append(block)
                            parity ^= _quote_parity(arr)
                            continue
                    elif b"\n" not in block:
                        pending.append(block)
                        continue
                    pending.append(block)
                    block = b"".join(pending)  # starts at a record start: parity 0
                    pending = []
                arr = np.frombuffer(block, dtype=np.uint8)
                lf, ends = ends_of(arr, 0)
                if ends.size == 0:
                    pending.append(block)
                    parity = _quote_parity(arr) if rfc else 0
                    continue
                skip = 3 if at_start and block.startswith(BOM) else 0
                at_start = False
                cut = int(ends[-1]) + 1
                every = ends.size == lf.size or ends.size == int(np.searchsorted(lf, cut))
                yield _batch(pa, arr[:cut], ends, skip, delimiter, n, every)
                if cut < len(block):
                    pending.append(block[cut:])
                    parity = _quote_parity(arr[cut:]) if rfc else 0
            if pending:  # a last record without its end: to the end of the file
                rest = b"".join(pending)
                skip = 3 if at_start and rest.startswith(BOM) else 0
                if len(rest) > skip:
                    arr = np.frombuffer(rest, dtype=np.uint8)
                    # rfc4180, an unterminated quote: its last line may end with an LF
                    end = arr.size - 1 if rest.endswith(b"\n") else arr.size
                    inner = int(np.count_nonzero(arr[:end] == 10)) if rfc else 0
                    last = np.array([end], dtype=np.int64)
                    yield _batch(pa, arr, last, skip, delimiter, n, inner == 0)
        finally:
            f.close()


def line_reader(
    files: Sequence[str],
    delimiter: str | None = None,
    n: int = 1,
    chunk_bytes: int = CHUNK_BYTES,
    mode: str = "lines",
) -> Any:
    """:func:`line_batches` as a ``pyarrow.RecordBatchReader`` (for ``duckdb.register``;
    it can be scanned once)."""
    import pyarrow as pa

    schema = pa.schema([("l", pa.large_string()), ("k", pa.uint8())])
    batches = line_batches(files, delimiter, n, chunk_bytes, mode)
    return pa.RecordBatchReader.from_batches(schema, batches)


# ------------------------------------------------------------- which writer made it


@dataclass(frozen=True)
class CsvShape:
    """What the bytes of CSV files say about their writer (:func:`csv_shape`; confidential:
    for the data owner's ``dpgauss check``, never for a release).

    ``lines``: the lines (rule 1); ``odd_quote_lines``: those with an odd number of quotes;
    ``records``: the ``rfc4180`` records; ``spanning_records``: those of more than one line,
    and ``spanning_lines`` their lines; ``unterminated_files``: the files with an odd number
    of quotes (their rest, from the last record end, is one malformed record under
    ``rfc4180``).  A file of an RFC-4180 writer has two lines of odd parity per quoted field
    with line breaks (where it opens and where it closes) and no unterminated file; a file of a
    writer that does not escape quotes has a stray quote on a line of its own, and under
    ``rfc4180`` its records swallow lines, up to the next stray quote or to the end.
    """

    files: int = 0
    lines: int = 0
    odd_quote_lines: int = 0
    records: int = 0
    spanning_records: int = 0
    spanning_lines: int = 0
    unterminated_files: int = 0

    def __add__(self, other: CsvShape) -> CsvShape:
        return CsvShape(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    def as_dict(self) -> dict[str, int]:
        """The counts by name."""
        return asdict(self)


def _file_shape(path: str, chunk_bytes: int) -> CsvShape:
    """:class:`CsvShape` of one file, streamed chunk by chunk.

    Line ``j`` (ended by the ``j``-th LF) ends a record iff ``E_j``: the quotes before its LF
    are even; it starts one iff ``S_j = E_{j-1}`` (``S_0`` true).  It is a record of its own
    iff ``S_j ∧ E_j``; a spanning record ends at ``j`` iff ``E_j ∧ ¬S_j``.  The last line (a
    piece without LF, or the last LF's line when the quotes are odd at the end) ends the
    last record whatever ``E``."""
    lines = odd = records = spanning = spanning_lines = 0
    parity = 0  # the quotes of the file so far, mod 2
    tail_quotes = 0  # the quotes of the line being read, so far
    tail = False  # whether the line being read has bytes (after the last LF)
    prev_end, last_start = True, True  # E of the last line ended; S of that line
    first = True
    with open_file(path) as f:
        while True:
            try:
                block = f.read(max(chunk_bytes, len(BOM)) if first else chunk_bytes)
            except (OSError, EOFError) as exc:
                raise CsvError(f"cannot read {path}: {exc}") from None
            if not block:
                break
            if first and block.startswith(BOM):
                block = block[len(BOM) :]
            first = False
            arr = np.frombuffer(block, dtype=np.uint8)
            lf = np.flatnonzero(arr == 10)
            quotes = np.flatnonzero(arr == 34)
            if lf.size:
                before = np.searchsorted(quotes, lf)
                per_line = np.diff(before, prepend=0)
                per_line[0] += tail_quotes
                odd += int(np.count_nonzero(per_line & 1))
                ends = ((before + parity) & 1) == 0
                starts = np.empty_like(ends)
                starts[0] = prev_end
                starts[1:] = ends[:-1]
                lines += lf.size
                records += int(np.count_nonzero(ends))
                spanning += int(np.count_nonzero(ends & ~starts))
                spanning_lines += int(np.count_nonzero(~(starts & ends)))
                prev_end, last_start = bool(ends[-1]), bool(starts[-1])
                tail_quotes = int(quotes.size - before[-1])
                tail = arr.size > int(lf[-1]) + 1
            else:
                tail_quotes += quotes.size
                tail = tail or arr.size > 0
            parity = (parity + quotes.size) & 1
    if tail:  # a last line without LF ends the last record
        lines += 1
        odd += tail_quotes & 1
        records += 1
        if not prev_end:
            spanning += 1
            spanning_lines += 1
    elif not prev_end:  # the quotes are odd at the final LF: its line ends the last record
        records += 1
        if last_start:
            spanning_lines -= 1  # a line of its own after all
        else:
            spanning += 1
    return CsvShape(1, lines, odd, records, spanning, spanning_lines, parity)


def csv_shape(files: Sequence[str], chunk_bytes: int = CHUNK_BYTES) -> CsvShape:
    """The :class:`CsvShape` of local CSV files (``.gz``/``.bz2`` decompressed): the same
    lines and record ends as :func:`split_lines` and :func:`split_records`, counted in one
    vectorised pass per chunk."""
    total = CsvShape()
    for path in files:
        total = total + _file_shape(path, chunk_bytes)
    return total
