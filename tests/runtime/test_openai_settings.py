"""An OpenAI-compatible backend refuses settings no request can work with, before the run.

Each was accepted and every call of the run then failed with a vague recorded error
(``ExceptionGroup``, ``FileNotFoundError`` without a name, ``UnicodeEncodeError``), and a
password in a base URL without a scheme was printed.
"""

from __future__ import annotations

import pytest

from orchestrace.errors import ConfigError
from orchestrace.runtime.backends.openai import OpenAIBackend

SECRET = "QSECRETQ"


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (f"u:{SECRET}@127.0.0.1:9/v1", "must start with http:// or https://"),
        (f"http://u:{SECRET}@[::1/v1", "is not a URL (Invalid IPv6 URL)"),
        ("http://127.0.0.1:99999/v1", "is not a URL (Port out of range"),
        ("http:///v1", "names no host"),
        (f"http://127.0.0.1:9/v1#{SECRET}", "has a ?query or #fragment"),
        (f"http://127.0.0.1:9/v1?key={SECRET}", "has a ?query or #fragment"),
    ],
)
def test_a_base_url_no_request_can_use_is_refused_without_its_secrets(url, said):
    with pytest.raises(ConfigError) as err:
        OpenAIBackend(base_url=url, model="m")
    assert said in str(err.value) and SECRET not in str(err.value)


@pytest.mark.parametrize("key", [f"sk-{SECRET}\u00e9", f"sk-{SECRET} ", f"sk-{SECRET}\n"])
def test_an_api_key_no_header_can_carry_is_refused_without_showing_it(key):
    with pytest.raises(ConfigError, match="no HTTP header can carry") as err:
        OpenAIBackend(base_url="http://127.0.0.1:9/v1", model="m", api_key=key)
    assert SECRET not in str(err.value)


def test_unreadable_certificates_are_named_for_https_only(tmp_path, monkeypatch):
    junk = tmp_path / "junk.pem"
    junk.write_text("junk\n")
    for cert in (str(tmp_path / "missing.pem"), str(junk)):
        monkeypatch.setenv("SSL_CERT_FILE", cert)
        with pytest.raises(ConfigError, match=r"cannot read the TLS certificates \(SSL_CERT_FILE="):
            OpenAIBackend(base_url="https://127.0.0.1:9/v1", model="m")
        OpenAIBackend(base_url="http://127.0.0.1:9/v1", model="m")  # plain HTTP: no TLS
