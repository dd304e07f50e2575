"""One hostile file costs bounded memory and processor time and is refused with a reason.

The hostile files are built here: zips whose headers are patched to declare false sizes,
compression bombs, PDFs whose pages share one huge content stream. Memory and processor
bounds are asserted the way the kernel enforces them, never by timing: the load runs in a
subprocess under RLIMIT_AS a few hundred MiB above its baseline and under RLIMIT_CPU, and
what is asserted is a clean rejection there (exit status 0, a FileRejectedError with the
reason), not a MemoryError, a kill or a clock reading. Were the parse not bounded, the
subprocess itself would die at those limits and the test would fail.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import resource
import signal
import struct
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any

import pytest
from pypdf import PdfWriter
from pypdf.generic import DictionaryObject, NameObject, StreamObject

from governed_evidence.config import Classification
from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.loaders import bounded, load_document
from governed_evidence.ingest.loaders import docx as docx_loader
from governed_evidence.ingest.loaders import pdf as pdf_loader
from governed_evidence.ingest.pipeline import ingest_corpus
from tests.helpers import HashEmbedder

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_CORPUS = ROOT / "data" / "sample_corpus"

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the bounds are Linux rlimits and the baseline is read from /proc"
)


# --- hostile files --------------------------------------------------------------------------------

_TEXT_OP = b"BT /F1 12 Tf 72 720 Td (Hostile text that repeats) Tj ET\n"


def hostile_pdf(path: Path, *, stream_bytes: int, pages: int = 1) -> Path:
    """Pages that all draw one content stream of ``stream_bytes`` (deflated: a few KB on disk).

    pypdf's cost per page grows faster than the stream: 1 MB takes about 1.6 s and 10 MB
    about 47 s and 300 MB of memory, and every page sharing the stream pays it again.
    """
    stream = StreamObject()
    stream.set_data(_TEXT_OP * max(1, stream_bytes // len(_TEXT_OP)))
    contents = stream.flate_encode()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    writer = PdfWriter()
    first = None
    for _ in range(pages):
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        if first is None:
            page.replace_contents(contents)
            first = page
        else:
            page[NameObject("/Contents")] = first.raw_get("/Contents")
    with path.open("wb") as fh:
        writer.write(fh)
    return path


def blank_pdf(path: Path, pages: int) -> Path:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(612, 792)
    with path.open("wb") as fh:
        writer.write(fh)
    return path


_NAMESPACES = (
    'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
)
_PACKAGE_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    "{entries}</Relationships>"
)
_MAIN_REL = (
    '<Relationship Id="rId{n}" Target="word/document.xml" '
    'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"/>'
)


def document_xml(paragraphs: list[str], *, heading: str = "Hostile document") -> bytes:
    body = f'<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>{heading}</w:t></w:r></w:p>'
    body += "".join(f"<w:p><w:r><w:t>{p}</w:t></w:r></w:p>" for p in paragraphs)
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><w:document {_NAMESPACES}><w:body>{body}</w:body></w:document>'.encode()
    )


def numbered_paragraphs(count: int) -> list[str]:
    # Distinct paragraphs deflate about 20:1, like real Word XML, so the ratio check passes.
    return [f"Paragraph {i} of a long policy, clause {i * 7919 % 10007}." for i in range(count)]


def write_docx(
    path: Path,
    document: bytes,
    *,
    main_parts: int = 1,
    extra: dict[str, bytes] | None = None,
    compression: int = zipfile.ZIP_DEFLATED,
) -> Path:
    rels = _PACKAGE_RELS.format(entries="".join(_MAIN_REL.format(n=n) for n in range(1, main_parts + 1)))
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        archive.writestr("_rels/.rels", rels)
        archive.writestr("word/document.xml", document)
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return path


def falsify_size(path: Path, member: str, declared: int) -> None:
    """Patch the uncompressed size ``member`` declares, in its local header and in the
    central directory, leaving the data (and its checksum) as they are."""
    data = bytearray(path.read_bytes())
    name = member.encode()
    patched = 0
    for signature, name_len_at, name_at, size_at in ((b"PK\x03\x04", 26, 30, 22), (b"PK\x01\x02", 28, 46, 24)):
        at = data.find(signature)
        while at >= 0:
            (name_len,) = struct.unpack_from("<H", data, at + name_len_at)
            if data[at + name_at : at + name_at + name_len] == name:
                struct.pack_into("<I", data, at + size_at, declared)
                patched += 1
            at = data.find(signature, at + 4)
    assert patched == 2
    path.write_bytes(bytes(data))


# --- the load, isolated under kernel limits -------------------------------------------------------

_ISOLATED = r"""
import json, resource, sys
from pathlib import Path

import docx2python, pypdf  # loaded before the baseline is taken, as in an ingest
from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.loaders import bounded, docx, load_document, pdf

def status_kib(field):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))

cfg = json.loads(sys.argv[1])
for module, name, value in cfg["patch"]:
    setattr({"bounded": bounded, "docx": docx, "pdf": pdf}[module], name, value)
baseline = status_kib("VmSize") << 10
baseline_rss = status_kib("VmRSS") << 10
limit = baseline + (cfg["memory_mib"] << 20)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
resource.setrlimit(resource.RLIMIT_CPU, (cfg["cpu_s"], cfg["cpu_s"]))
try:
    load_document(Path(cfg["path"]), "hostile")
    out = {"outcome": "loaded"}
except FileRejectedError as exc:
    out = {"outcome": "rejected", "reason": str(exc)}
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
out["children_cpu_s"] = kids.ru_utime + kids.ru_stime
# ru_maxrss of this process would include the test runner's, kept across exec; VmHWM is
# its own peak. A forked child's peak includes the pages it shares with this process.
out["children_peak_rss_mib"] = kids.ru_maxrss / 1024
out["peak_rss_mib"] = status_kib("VmHWM") / 1024
out["baseline_rss_mib"] = baseline_rss / 2**20
print(json.dumps(out))
"""


def load_isolated(
    path: Path, *, memory_mib: int = 384, cpu_s: int = 60, patch: tuple[tuple[str, str, object], ...] = ()
) -> dict[str, Any]:
    """Load ``path`` in a subprocess limited to ``memory_mib`` above its baseline and to
    ``cpu_s`` of processor time; the subprocess must end normally."""
    cfg = {"path": str(path), "memory_mib": memory_mib, "cpu_s": cpu_s, "patch": list(patch)}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # The timeout only keeps a broken build from hanging the suite; nothing is timed.
    proc = subprocess.run(
        [sys.executable, "-c", _ISOLATED, json.dumps(cfg)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
        check=False,
    )
    # A kill (negative status) or a MemoryError traceback means the bound did not hold.
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    assert "MemoryError" not in proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# --- DOCX: judged by its directory, decompressed through a cap, parsed under the budgets ----------


def test_minimal_docx_built_here_loads(tmp_path: Path) -> None:
    # The hostile variants below differ from this one only in what makes them hostile.
    doc = load_document(write_docx(tmp_path / "ok.docx", document_xml(["Plain text."])), "ok")
    assert [b.text for b in doc.blocks] == ["Hostile document", "Plain text."]


def test_docx_declaring_small_sizes_for_a_huge_part_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    # 100 MB of XML deflates to about 300 KB; its headers then claim 20 KB, which passes every
    # declared-size check. The decompression is what has to stop.
    path = write_docx(tmp_path / "falsified.docx", document_xml(["x"] * 2_900_000))
    assert path.stat().st_size < 1_000_000
    falsify_size(path, "word/document.xml", 20_000)
    with zipfile.ZipFile(path) as archive:
        assert archive.getinfo("word/document.xml").file_size == 20_000

    with pytest.raises(FileRejectedError, match=r"damaged or declares false sizes \(BadZipFile\)"):
        load_document(path, "falsified")
    result = load_isolated(path, memory_mib=256)
    assert result["outcome"] == "rejected"
    assert "declares false sizes" in result["reason"]
    assert result["peak_rss_mib"] < result["baseline_rss_mib"] + 32


def test_docx_declaring_an_absurd_compression_ratio_is_refused_before_decompressing(tmp_path: Path) -> None:
    # The same 300 KB of data now declares 150 MB (under the 200 MB total): 500:1.
    path = write_docx(tmp_path / "ratio.docx", document_xml(["x"] * 2_900_000))
    falsify_size(path, "word/document.xml", 150_000_000)
    with pytest.raises(FileRejectedError, match=r"expands \d+:1, over the 200:1 limit"):
        load_document(path, "ratio")


def test_docx_compression_bomb_in_an_unread_member_is_refused_by_ratio(tmp_path: Path) -> None:
    padding = {"word/media/padding.bin": b"\0" * 20_000_000}
    path = write_docx(tmp_path / "bomb.docx", document_xml(["Plain text."]), extra=padding)
    assert path.stat().st_size < 100_000
    with pytest.raises(FileRejectedError, match=r"expands \d+:1"):
        load_document(path, "bomb")


def test_docx_whose_text_parts_exceed_the_parse_cap_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_docx(tmp_path / "big.docx", document_xml(numbered_paragraphs(20_000)))
    monkeypatch.setattr(docx_loader, "MAX_PARSED_BYTES", 200_000)
    with pytest.raises(FileRejectedError, match="text parts expand past the 200000-byte limit"):
        load_document(path, "big")


def test_capped_read_does_not_trust_the_declared_size(tmp_path: Path) -> None:
    # Even were zipfile to read past what a member declares, the cap counts real bytes.
    path = write_docx(tmp_path / "big.docx", document_xml(numbered_paragraphs(50_000)))
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("word/document.xml")
        actual = info.file_size
        assert actual > 2_000_000
        info.file_size = 10**12  # declares more, so zipfile would not stop early
        with pytest.raises(FileRejectedError, match="expand past"):
            docx_loader._read_capped(archive, info, 1_000_000)
        info.file_size = actual
        assert len(docx_loader._read_capped(archive, info, actual)) == actual


def test_docx_with_too_many_members_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {f"customXml/item{i}.xml": b"<a/>" for i in range(20)}
    path = write_docx(tmp_path / "many.docx", document_xml(["Plain text."]), extra=extra)
    monkeypatch.setattr(docx_loader, "MAX_MEMBERS", 10)
    with pytest.raises(FileRejectedError, match="22 archive members, over the 10-member limit"):
        load_document(path, "many")


def test_docx_with_two_members_of_one_name_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "twice.docx"
    write_docx(path, document_xml(["First copy."]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate it is asked to write
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr("word/document.xml", document_xml(["Second copy."]))
    with pytest.raises(FileRejectedError, match="same name"):
        load_document(path, "twice")


def test_docx_with_a_compression_method_word_does_not_write_is_refused(tmp_path: Path) -> None:
    path = write_docx(tmp_path / "bz2.docx", document_xml(["Plain text."]), compression=zipfile.ZIP_BZIP2)
    with pytest.raises(FileRejectedError, match="compression method"):
        load_document(path, "bz2")


def test_docx_declaring_many_main_documents_is_refused(tmp_path: Path) -> None:
    # docx2python parses every main part it is pointed at: 500 references, 500 parses.
    path = write_docx(tmp_path / "mains.docx", document_xml(["Plain text."]), main_parts=500)
    with pytest.raises(FileRejectedError, match="500 main document parts"):
        load_document(path, "mains")


def test_docx_parse_over_the_memory_budget_is_refused_cleanly(tmp_path: Path) -> None:
    # 8 MB of XML: within every size limit, but docx2python builds ~250 MiB of objects for it.
    path = write_docx(tmp_path / "heavy.docx", document_xml(numbered_paragraphs(100_000)))
    result = load_isolated(
        path,
        memory_mib=384,
        patch=(("bounded", "PER_FILE_MEMORY_BYTES", 64 << 20), ("docx", "CPU_BASE_SECONDS", 100.0)),
    )
    assert (result["outcome"], result["reason"]) == ("rejected", "DOCX exceeded the per-file memory budget (64 MiB)")
    assert result["children_peak_rss_mib"] < result["baseline_rss_mib"] + 64 + 64
    assert result["peak_rss_mib"] < result["baseline_rss_mib"] + 32


def test_docx_parse_over_its_processor_allowance_is_refused_cleanly(tmp_path: Path) -> None:
    # 3 MB of XML takes docx2python about 8 s; the allowance here is 1 s.
    path = write_docx(tmp_path / "slow.docx", document_xml(numbered_paragraphs(40_000)))
    result = load_isolated(
        path, cpu_s=30, patch=(("docx", "CPU_BASE_SECONDS", 1.0), ("docx", "CPU_SECONDS_PER_MIB", 0.0))
    )
    assert result["outcome"] == "rejected"
    assert result["reason"].startswith("DOCX exceeded the per-file processor budget")
    assert "MiB of XML, with 1 s plus 0 s a MiB allowed" in result["reason"]
    # Stopped within a watchdog tick of the allowance (the slack covers reporting and a loaded host).
    assert result["children_cpu_s"] < 1.0 + 1.5


# --- PDF: pages, text and processor time paced, memory bounded -----------------------------------


def test_pdf_with_more_pages_than_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pdf_loader, "MAX_PAGES", 5)
    with pytest.raises(FileRejectedError, match="PDF has 6 pages, over the 5-page limit"):
        load_document(blank_pdf(tmp_path / "pages.pdf", 6), "pages")


def test_pdf_yielding_more_text_than_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = hostile_pdf(tmp_path / "text.pdf", stream_bytes=100_000)
    monkeypatch.setattr(pdf_loader, "MAX_CHARS", 20_000)
    with pytest.raises(FileRejectedError, match="more than 20000 characters"):
        load_document(path, "text")


def test_pdf_pages_sharing_a_heavy_stream_are_stopped_by_the_page_pacing(tmp_path: Path) -> None:
    # 40 pages of about 0.3 s each (one 200 KB stream drawn 40 times) against 1 s plus 0.05 s
    # a page: refused after a few pages, long before the 120 s per-file ceiling.
    path = hostile_pdf(tmp_path / "shared.pdf", stream_bytes=200_000, pages=40)
    assert path.stat().st_size < 50_000
    result = load_isolated(
        path, cpu_s=30, patch=(("pdf", "CPU_BASE_SECONDS", 1.0), ("pdf", "CPU_SECONDS_PER_PAGE", 0.05))
    )
    assert result["outcome"] == "rejected"
    assert result["reason"].startswith("PDF exceeded the per-file processor budget")
    assert "of 40, with 1 s plus 0.05 s a page allowed" in result["reason"]
    # At most the allowance for all 40 pages, plus a watchdog tick and the time to report.
    assert result["children_cpu_s"] < 1.0 + 0.05 * 40 + 1.5


def test_pdf_page_over_the_per_file_ceiling_is_stopped(tmp_path: Path) -> None:
    # One page that would take about 47 s; pacing is lifted, so only the ceiling (2 s) stops it.
    path = hostile_pdf(tmp_path / "heavy.pdf", stream_bytes=10_000_000)
    result = load_isolated(
        path, cpu_s=30, patch=(("bounded", "PER_FILE_CPU_SECONDS", 2), ("pdf", "CPU_BASE_SECONDS", 1000.0))
    )
    assert result["outcome"] == "rejected"
    assert "processor budget" in result["reason"] and "the per-file limit of 2 s" in result["reason"]
    assert result["children_cpu_s"] < 2 + 1.5


def test_pdf_page_over_the_memory_budget_is_refused_cleanly(tmp_path: Path) -> None:
    # The same page needs about 300 MiB; the per-file budget here is 96 MiB, the subprocess
    # as a whole has 384 MiB above its baseline.
    path = hostile_pdf(tmp_path / "heavy.pdf", stream_bytes=10_000_000)
    result = load_isolated(
        path,
        memory_mib=384,
        cpu_s=120,
        patch=(("bounded", "PER_FILE_MEMORY_BYTES", 96 << 20), ("pdf", "CPU_BASE_SECONDS", 1000.0)),
    )
    assert (result["outcome"], result["reason"]) == ("rejected", "PDF exceeded the per-file memory budget (96 MiB)")
    # The parser process stayed near its budget, and the ingest side never held its memory.
    assert result["children_peak_rss_mib"] < result["baseline_rss_mib"] + 96 + 64
    assert result["peak_rss_mib"] < result["baseline_rss_mib"] + 32


def test_hostile_files_are_rejected_and_the_rest_of_the_corpus_is_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "policy.md").write_text("# Travel policy\n\nEconomy class is booked for flights under six hours.\n")
    hostile_pdf(corpus / "shared.pdf", stream_bytes=200_000, pages=40)
    falsified = write_docx(corpus / "falsified.docx", document_xml(["x"] * 2_900_000))
    falsify_size(falsified, "word/document.xml", 20_000)
    monkeypatch.setattr(pdf_loader, "CPU_BASE_SECONDS", 1.0)
    monkeypatch.setattr(pdf_loader, "CPU_SECONDS_PER_PAGE", 0.05)

    report = ingest_corpus(
        corpus, tmp_path / "index.sqlite", HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None
    )
    reasons = dict(report.rejected)
    assert set(reasons) == {"shared.pdf", "falsified.docx"}
    assert reasons["shared.pdf"].startswith("PDF exceeded the per-file processor budget")
    assert "declares false sizes" in reasons["falsified.docx"]
    assert report.documents_indexed == 1


# --- the same result through the child as in-process ------------------------------------------------


@pytest.mark.parametrize("path", sorted(SAMPLE_CORPUS.rglob("*.pdf")), ids=lambda p: p.name)
def test_pdf_extraction_through_the_child_equals_in_process(path: Path) -> None:
    assert bounded.run_bounded("PDF", pdf_loader._extract, path) == pdf_loader._extract(path)


@pytest.mark.parametrize("path", sorted(SAMPLE_CORPUS.rglob("*.docx")), ids=lambda p: p.name)
def test_docx_extraction_through_the_child_equals_in_process(path: Path) -> None:
    assert bounded.run_bounded("DOCX", docx_loader._extract, path) == docx_loader._extract(path)


def test_the_sample_corpus_has_pdf_and_docx_files() -> None:
    assert list(SAMPLE_CORPUS.rglob("*.pdf")) and list(SAMPLE_CORPUS.rglob("*.docx"))


# --- the bounded runner itself ------------------------------------------------------------------


def _busy(seconds: float | None = None) -> None:
    end = time.process_time() + (seconds if seconds is not None else 1e9)
    while time.process_time() < end:
        pass


def _swallow_every_stop() -> None:
    # A parser that catches everything and carries on.
    while True:
        with contextlib.suppress(BaseException):
            _busy()


def _native_loop() -> None:
    # One long call in C: no Python code runs until it returns, the watchdog included.
    sum(range(10**13))


def _allocate() -> None:
    hoard = []
    while True:
        hoard.append(bytearray(16 << 20))


def test_runner_returns_what_the_child_computed() -> None:
    pid, inner = bounded.run_bounded("T", lambda: (os.getpid(), bounded.run_bounded("U", os.getpid)))
    assert pid != os.getpid()
    assert inner == pid  # inside a bounded child, the work runs inline
    assert not bounded.in_bounded_child()


def test_runner_sets_the_limits_in_the_child() -> None:
    parent_limits = [resource.getrlimit(r) for r in (resource.RLIMIT_CPU, resource.RLIMIT_AS, resource.RLIMIT_CORE)]
    cpu, core = bounded.run_bounded(
        "T", lambda: (resource.getrlimit(resource.RLIMIT_CPU), resource.getrlimit(resource.RLIMIT_CORE))
    )
    assert cpu == (bounded.PER_FILE_CPU_SECONDS + 2, bounded.PER_FILE_CPU_SECONDS + 2)
    assert core == (0, 0)
    soft, hard = bounded.run_bounded("T", resource.getrlimit, resource.RLIMIT_AS)
    assert soft == hard != resource.RLIM_INFINITY
    assert [resource.getrlimit(r) for r in (resource.RLIMIT_CPU, resource.RLIMIT_AS, resource.RLIMIT_CORE)] == (
        parent_limits
    )


def test_runner_passes_rejections_and_errors_back() -> None:
    def reject() -> None:
        raise FileRejectedError("PDF is encrypted and needs a password")

    def fail() -> None:
        raise KeyError("bug")

    with pytest.raises(FileRejectedError, match=r"^PDF is encrypted and needs a password$"):
        bounded.run_bounded("PDF", reject)
    with pytest.raises(KeyError) as info:
        bounded.run_bounded("PDF", fail)
    assert any("raised in the PDF parser process" in note for note in info.value.__notes__)


def test_runner_turns_memory_exhaustion_into_a_rejection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded, "PER_FILE_MEMORY_BYTES", 64 << 20)
    with pytest.raises(FileRejectedError, match=r"^T exceeded the per-file memory budget \(64 MiB\)$"):
        bounded.run_bounded("T", _allocate)


def test_runner_stops_work_at_the_processor_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded, "PER_FILE_CPU_SECONDS", 1)
    with pytest.raises(FileRejectedError, match=r"processor budget \(stopped after .* the per-file limit of 1 s\)"):
        bounded.run_bounded("T", _busy)


def test_runner_stops_work_that_catches_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    # The watchdog does not raise into the work: it reports and exits, so nothing can catch it.
    monkeypatch.setattr(bounded, "PER_FILE_CPU_SECONDS", 1)
    with pytest.raises(FileRejectedError, match=r"processor budget \(stopped after .* the per-file limit of 1 s\)"):
        bounded.run_bounded("T", _swallow_every_stop)


def test_runner_kills_work_stuck_in_native_code(monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel's hard limit, two seconds past the budget, is a kill.
    monkeypatch.setattr(bounded, "PER_FILE_CPU_SECONDS", 1)
    with pytest.raises(FileRejectedError, match=r"memory/processor budget \(the parser process stopped by SIGKILL\)"):
        bounded.run_bounded("T", _native_loop)


def _crash() -> None:
    # A parser crashing in native code (pytest's fault handler would print it: quieted).
    faulthandler.disable()
    os.kill(os.getpid(), signal.SIGSEGV)


def test_runner_reports_a_child_that_crashes() -> None:
    with pytest.raises(FileRejectedError, match=r"^T exceeded .* \(the parser process stopped by SIGSEGV\)$"):
        bounded.run_bounded("T", _crash)


def test_runner_gives_up_on_a_child_that_does_not_finish(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded, "PER_FILE_CPU_SECONDS", 1)
    monkeypatch.setattr(bounded, "_WALL_FACTOR", 0)
    monkeypatch.setattr(bounded, "_WALL_EXTRA_SECONDS", 1)
    with pytest.raises(FileRejectedError, match="did not finish within 1 s"):
        bounded.run_bounded("T", time.sleep, 60)


def test_pacing_below_what_was_used_stops_at_once() -> None:
    def paced() -> None:
        _busy(0.2)
        bounded.limit_cpu(0.1, "at step 2")

    with pytest.raises(FileRejectedError, match=r"processor budget \(stopped after .*, at step 2\)"):
        bounded.run_bounded("T", paced)
    bounded.limit_cpu(0.0)  # outside a bounded child: nothing happens
