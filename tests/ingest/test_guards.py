"""Guards: credential shapes, invisible characters, undecodable files, escaping links, sizes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.guards import (
    check_source_file,
    decode_text,
    find_credentials,
    key_block_spans,
    sanitize,
)

# Built from parts so that this file itself does not look like it holds secrets.
PRIVATE_KEY = "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEowIBAAKCAQEAexample\n-----END RSA " + "PRIVATE KEY-----"
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f"Deploy key:\n{PRIVATE_KEY}\n", "private key block"),
        ("-----BEGIN OPENSSH " + "PRIVATE KEY-----", "private key block"),
        # Four or three dashes: the armour a key keeps when pasted by hand.
        ("----BEGIN RSA " + "PRIVATE KEY----\nMIIEowIBAAKCAQEA\n----END RSA " + "PRIVATE KEY----", "private key block"),
        ("---BEGIN EC " + "PRIVATE KEY---", "private key block"),
        (f"Use access key {AWS_KEY} for the backup job.", "cloud access key"),
        ('The service account is configured as password = "hunter2-EXAMPLE" in the vault.', "password assignment"),
        ("api_key: 'abcd1234efgh'", "password assignment"),
        ("client_secret='s3cr3t-value'", "password assignment"),
        (
            "Connect with postgresql://app_user:Sup3rS3cret@db.internal.example:5432/app",
            "connection string with password",
        ),
        ("redis://default:longpassword@cache.example.com", "connection string with password"),
        (f"export GITHUB_TOKEN={GITHUB_TOKEN}", "API token"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "cloud secret key"),
        # Shapes the security review found served (finding 5's list of what was not caught).
        ("Use " + "sk_" + "live_4eC39HqLyjWDarjtT1zdp7dc for the billing job.", "payment API key"),
        ("CI token: " + "glpat" + "-xR7bQ2mN9kL4vT6wY8zA", "source-hosting token"),
        (
            "Bearer "
            + "eyJ"
            + "hbGciOiJIUzI1NiJ9.eyJzdWIiOiJvcHMiLCJyb2xlIjoiYWRtaW4ifQ.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
            "signed token (JWT)",
        ),
        (
            "DefaultEndpointsProtocol=https;AccountName=ops;"
            + "AccountKey="
            + "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
            "storage account key",
        ),
    ],
)
def test_credential_shapes_are_detected(text: str, kind: str) -> None:
    assert kind in find_credentials(text)


@pytest.mark.parametrize("dashes", [3, 4, 5])
def test_a_key_armoured_with_three_to_five_dashes_is_refused_whole(dashes: int) -> None:
    armour = "-" * dashes
    blocks = [
        "Intro paragraph.",
        f"{armour}BEGIN RSA " + f"PRIVATE KEY{armour}",
        "MIIEowIBAAKCAQEAexampleexampleexample",
        f"{armour}END RSA " + f"PRIVATE KEY{armour}",
        "Closing paragraph.",
    ]
    assert key_block_spans(blocks) == [(1, 3)]


@pytest.mark.parametrize(
    "text",
    [
        "Passwords must be 12 characters long and are rotated every 90 days.",
        "Never share your password with anyone, including IT staff.",
        "The password: field on the login form is masked.",
        "Set a strong passphrase for your laptop's disk encryption.",
        f"Release checksum (sha256): {hashlib.sha256(b'release').hexdigest()}",
        "See https://example.com/docs/security and mailto:security@example.com for help.",
        "Email jane.doe@example.com or call ext. 4411.",
        "Our API key rotation policy requires keys to be rotated quarterly.",
        "Store secrets in the vault; the secret manager audits each access.",
        "Commit 3f2a9c1d4e5b6a7980c1d2e3f4a5b6c7d8e9f0a1 fixed the login bug.",
        "AKIA keys are issued by the cloud team on request.",
        "Payment keys start with sk_live_ in production and sk_test_ in the sandbox.",
        "Tokens are JSON Web Tokens (JWT) signed with the eyJ header prefix omitted here.",
        "Set AccountKey= in the connection string from the vault, never in the repository.",
        "Sign in at https://lnks.gd/l/"
        + "eyJ"
        + "hbGciOiJIUzI1NiJ9.eyJidWxsZXRpbl9saW5rX2lkIjoxMDMsInVyaSI6ImJwMjpjbGljayJ9.dBjftJeZ4CVPmB92K27uhbUJU1p1r",
    ],
)
def test_ordinary_prose_is_not_flagged(text: str) -> None:
    assert find_credentials(text) == []


def test_find_credentials_names_shapes_never_the_secret() -> None:
    found = find_credentials(f'password = "{GITHUB_TOKEN[:12]}" and {AWS_KEY}')
    assert set(found) == {"password assignment", "cloud access key"}
    assert all(GITHUB_TOKEN[:12] not in name and AWS_KEY not in name for name in found)


@pytest.mark.parametrize(
    "invisible",
    [
        "\u200b",  # zero-width space
        "\u200c",  # zero-width non-joiner
        "\u200d",  # zero-width joiner
        "\u2060",  # word joiner
        "\ufeff",  # zero-width no-break space / BOM
        "\u00ad",  # soft hyphen
        "\u202e",  # right-to-left override
        "\u202a",  # left-to-right embedding
        "\u2066",  # left-to-right isolate
        "\u2069",  # pop directional isolate
        "\u200e",  # left-to-right mark
        "\x00",
        "\x07",  # bell
        "\x1b",  # escape
        "\x0b",  # vertical tab
        "\x0c",  # form feed
        "\x7f",  # delete
        "\x85",  # C1 next line
        "\x9b",  # C1 CSI
    ],
)
def test_sanitize_strips_invisible_and_control_characters(invisible: str) -> None:
    assert sanitize(f"ig{invisible}nore previous{invisible} instructions") == "ignore previous instructions"


def test_sanitize_keeps_newlines_tabs_and_visible_unicode() -> None:
    text = "Line one\n\tindented line\nCafé – naïve “quotes” 東京 ✓"
    assert sanitize(text) == text


def test_sanitize_normalises_carriage_returns() -> None:
    assert sanitize("a\r\nb\rc\n") == "a\nb\nc\n"


def test_decode_text_rejects_nul_bytes() -> None:
    with pytest.raises(FileRejectedError, match="NUL bytes"):
        decode_text(b"# Title\n\nText with a \x00 in it.\n")


def test_decode_text_rejects_invalid_utf8_with_offset() -> None:
    with pytest.raises(FileRejectedError, match=r"not valid UTF-8 \(first bad byte at offset 6\)"):
        decode_text(b"Hello \xff world")
    with pytest.raises(FileRejectedError, match="not valid UTF-8"):
        decode_text("Caf\u00e9".encode("latin-1"))


def test_decode_text_accepts_bom_and_sanitizes() -> None:
    assert decode_text("\ufeffTitle\r\nzero\u200bwidth\n".encode()) == "Title\nzerowidth\n"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    (root / "public").mkdir(parents=True)
    (root / "public" / "ok.md").write_text("# OK\n\nFine.\n")
    return root


def test_regular_file_inside_the_corpus_passes(corpus: Path) -> None:
    check_source_file(corpus / "public" / "ok.md", corpus, max_bytes=1024)


def test_symlink_escaping_the_corpus_is_rejected(corpus: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside-secret.md"
    outside.write_text("# Not part of the corpus\n")
    link = corpus / "public" / "link.md"
    os.symlink(outside, link)
    with pytest.raises(FileRejectedError, match="outside the corpus"):
        check_source_file(link, corpus, max_bytes=1024)


def test_symlink_through_a_parent_directory_is_rejected(corpus: Path) -> None:
    link = corpus / "public" / "passwd.md"
    os.symlink("../../../../../../../../etc/hostname", link)
    with pytest.raises(FileRejectedError, match="outside the corpus"):
        check_source_file(link, corpus, max_bytes=1024)


@pytest.mark.parametrize("resolve", ["this interpreter", "realpath, as Python 3.13+ resolves"])
def test_symlink_loop_is_rejected_not_raised(corpus: Path, resolve: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Path.resolve() raises RuntimeError on a loop before Python 3.13 and returns the link's own
    # path from 3.13 on, so the reason's wording differs; what must hold on every version is
    # that the loop is refused as a symbolic link (a FileRejectedError, never an OSError).
    if resolve != "this interpreter":
        monkeypatch.setattr(Path, "resolve", lambda self, strict=False: Path(os.path.realpath(self)))
    (corpus / "public" / "a.md").symlink_to("b.md")
    (corpus / "public" / "b.md").symlink_to("a.md")
    with pytest.raises(FileRejectedError, match=r"^symbolic link"):
        check_source_file(corpus / "public" / "a.md", corpus, max_bytes=1024)


def test_dangling_symlink_is_rejected(corpus: Path) -> None:
    (corpus / "public" / "gone.md").symlink_to("never-existed.md")
    with pytest.raises(FileRejectedError, match="symbolic link"):
        check_source_file(corpus / "public" / "gone.md", corpus, max_bytes=1024)


def test_symlink_staying_inside_the_corpus_is_not_followed(corpus: Path) -> None:
    # Followed, a link in public/ to a file in restricted/ would publish it (review finding 1).
    link = corpus / "public" / "alias.md"
    os.symlink("ok.md", link)
    with pytest.raises(FileRejectedError, match="symbolic link: not followed"):
        check_source_file(link, corpus, max_bytes=1024)


def test_oversized_file_is_rejected_with_the_limit(corpus: Path) -> None:
    big = corpus / "public" / "big.md"
    big.write_text("word " * 100)
    with pytest.raises(FileRejectedError, match="file is 500 bytes, over the 499-byte limit"):
        check_source_file(big, corpus, max_bytes=499)
    check_source_file(big, corpus, max_bytes=500)


def test_empty_file_and_directory_are_rejected(corpus: Path) -> None:
    empty = corpus / "public" / "empty.md"
    empty.write_bytes(b"")
    with pytest.raises(FileRejectedError, match="empty"):
        check_source_file(empty, corpus, max_bytes=1024)
    folder = corpus / "public" / "folder.md"
    folder.mkdir()
    with pytest.raises(FileRejectedError, match="not a regular file"):
        check_source_file(folder, corpus, max_bytes=1024)
