"""Clients that send credentials only when a 401 asks for them: `curl --anyauth` and Java's
java.net.Authenticator (behind HttpURLConnection, as a Gobblin script without a Rest.li
filter uses it). Both run for real against a live portal: they answer the challenge only
with a scheme it offers, and Basic is the one they know."""

from __future__ import annotations

import subprocess

import pytest

from portal.flows.models import FlowConfig
from tests.builders.restli import flow_config
from tests.factories import PASSWORD

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("packs")]

KEY = "/flowconfigsV2/(flowGroup:team,flowName:nightly)"

PROBE = """
import java.io.InputStream;
import java.net.Authenticator;
import java.net.HttpURLConnection;
import java.net.PasswordAuthentication;
import java.net.URL;

public class Probe {
  public static void main(String[] args) throws Exception {
    Authenticator.setDefault(new Authenticator() {
      @Override protected PasswordAuthentication getPasswordAuthentication() {
        System.out.println("asked: " + getRequestingScheme());
        return new PasswordAuthentication(args[1], args[2].toCharArray());
      }
    });
    HttpURLConnection connection = (HttpURLConnection) new URL(args[0]).openConnection();
    connection.setRequestProperty("X-RestLi-Protocol-Version", "2.0.0");
    int status = connection.getResponseCode();
    InputStream body = status < 400 ? connection.getInputStream() : connection.getErrorStream();
    System.out.println("status: " + status);
    System.out.println(new String(body.readAllBytes(), "UTF-8"));
  }
}
"""


@pytest.fixture
def flow(wire):
    assert wire.send("POST", "/flowconfigsV2", flow_config(), "create").status_code == 201
    return FlowConfig.objects.get(flow_name="nightly")


def test_curl_anyauth_answers_the_challenge_with_basic(live_server, owner, flow):
    done = subprocess.run(
        [
            "curl", "--silent", "--show-error", "--anyauth", "--user", f"{owner.username}:{PASSWORD}",
            "--header", "X-RestLi-Protocol-Version: 2.0.0", "--write-out", "\n%{http_code}",
            f"{live_server.url}{KEY}",
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    body, _, status = done.stdout.rpartition("\n")
    assert status == "200", done.stdout + done.stderr
    assert '"flowName": "nightly"' in body or '"flowName":"nightly"' in body


def test_java_authenticator_answers_the_challenge_with_basic(live_server, owner, flow, tmp_path):
    source = tmp_path / "Probe.java"
    source.write_text(PROBE)
    done = subprocess.run(
        ["java", str(source), f"{live_server.url}{KEY}", owner.username, PASSWORD],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert "asked: basic" in done.stdout.lower(), done.stdout + done.stderr
    assert "status: 200" in done.stdout, done.stdout + done.stderr
    assert '"nightly"' in done.stdout
