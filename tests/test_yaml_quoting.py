"""Rendered YAML never changes a string's meaning: every string reads back as the same string.

Readers: PyYAML (YAML 1.1 as PyYAML implements it), ruamel.yaml's YAML 1.2 reader, and ruamel.yaml's YAML
1.1 reader, which also knows the booleans PyYAML leaves out (``y``, ``n``) and floats without a dot, as
go-yaml (Kubernetes, eksctl) does.
"""

from __future__ import annotations

import io
import warnings
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from kgpu.model.profile import TEMPLATES, Profile, builtin_profile, parse_profile, template_text
from kgpu.render import yamltext
from kgpu.render.stack import render_files, render_stack

# The strings the issue names, plus every other scalar form some YAML reader resolves.
TRICKY = [
    "y", "Y", "n", "N", "yes", "Yes", "YES", "no", "NO", "on", "On", "ON", "off", "Off", "OFF",
    "true", "True", "FALSE", "~", "null", "Null", "NULL", "", "1e3", "1E3", "1.0e3", "-1e-3", "+1e+3",
    ".5", "5.", "1.2.3", "1_000", "017", "0777", "08", "0o17", "0b101", "0x1F", "-0x1f", "1:20", "1:20.5",
    "190:20:30", ".inf", "-.Inf", "+.INF", ".nan", ".NaN", "2001-12-14", "2001-12-14t21:59:43.10-05:00",
    "=", "<<", "-", "+1", "-0", "0", "12", "1.33", "3.14159", "@x", "`x", "!x", "&x", "*x", "%x", "#x",
    "x #y", "x: y", "- x", "? x", "[x]", "{x}", " x", "x ", "'", '"', "a\nb", "a\n", "\t", "x\u0085y",
]  # fmt: skip

_ruamel12 = YAML(typ="safe", pure=True)
_ruamel11 = YAML(typ="safe", pure=True)
_ruamel11.version = (1, 1)


def _readers(text: str) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ruamel's "YAML 1.1 floats should have a dot" notices
        return {
            "pyyaml": yaml.safe_load(text),
            "yaml-1.2": _ruamel12.load(io.StringIO(text)),
            "yaml-1.1": _ruamel11.load(io.StringIO(text)),
        }


def _round_trips(value: str) -> None:
    doc = {"key": value, value: "as-a-key", "list": [value], "nested": {"labels": {"x": value}}}
    text = yamltext.dump_documents([doc])
    for reader, back in _readers(text).items():
        assert back == doc, f"{reader} reads {value!r} back as something else from:\n{text}"


@pytest.mark.parametrize("value", TRICKY)
def test_tricky_strings_read_back_as_strings(value: str) -> None:
    """Each named form (y, n, on, 1e3, octal-looking, ~, ...) survives all three readers."""
    _round_trips(value)


def test_y_is_quoted_and_plain_strings_stay_plain() -> None:
    """The issue's case: a label value y is written quoted; an ordinary value is not."""
    text = yamltext.dump({"spot-ok": "y", "node-type": "gpu", "n": 1, "flag": True, "ratio": 0.5})
    assert text == "spot-ok: 'y'\nnode-type: gpu\n'n': 1\nflag: true\nratio: 0.5\n"


_yamlish = st.text(alphabet=st.sampled_from(list("yYnNoOeE0123456789._-+:~x tT")), max_size=8)


@settings(max_examples=400, deadline=None)
@given(st.one_of(_yamlish, st.sampled_from(TRICKY), st.text(max_size=12)))
def test_any_string_round_trips(value: str) -> None:
    """Property: any string, and especially number-, bool- and null-looking ones, reads back unchanged."""
    _round_trips(value)


_label_value = st.from_regex(r"\A([A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?)?\Z")


def _embedded_yaml(docs: list[dict[str, Any]]) -> list[str]:
    """ConfigMap values that are YAML files themselves (prometheus.yml, the device plugin's config.yaml)."""
    return [
        text
        for d in docs
        if d.get("kind") == "ConfigMap"
        for key, text in d.get("data", {}).items()
        if key.endswith((".yml", ".yaml"))
    ]


def _assert_every_reader_agrees(profile: Profile, targets: list[str] | None = None) -> None:
    for target, docs in render_stack(profile, targets).items():
        for reader, back in _multi(yamltext.dump_documents(docs)).items():
            assert back == docs, f"{target}: {reader} reads the documents differently"
        for text in _embedded_yaml(docs):
            readings = _multi(text)
            assert readings["yaml-1.2"] == readings["pyyaml"] == readings["yaml-1.1"], f"{target}: {text}"


@settings(max_examples=25, deadline=None)
@given(_label_value, _label_value)
def test_profile_label_and_taint_values_survive_every_target(label: str, taint: str) -> None:
    """Property: a pool's label and taint values come back as the same strings from every rendered
    document (manifests, Helm values, eksctl config) in every reader."""
    data = yaml.safe_load(template_text("eks-eksctl"))
    gpu = data["pools"][1]
    gpu["labels"]["spot-ok"] = label
    gpu["taints"] = [{"key": "dedicated", "value": taint, "effect": "NoSchedule"}]
    profile = parse_profile(data)
    _assert_every_reader_agrees(profile, ["eksctl", "cluster-autoscaler", "device-plugin", "workloads"])
    text = render_files(profile)["eksctl.yaml"]
    for reader, docs in _multi(text).items():
        group = docs[0]["nodeGroups"][1]
        assert group["labels"]["spot-ok"] == label, reader


def _multi(text: str) -> dict[str, list[Any]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "pyyaml": list(yaml.safe_load_all(text)),
            "yaml-1.2": list(_ruamel12.load_all(io.StringIO(text))),
            "yaml-1.1": list(_ruamel11.load_all(io.StringIO(text))),
        }


@pytest.mark.parametrize("template", TEMPLATES)
def test_built_in_templates_read_the_same_in_every_reader(template: str) -> None:
    """Every rendered document of every template reads back equal to what was rendered, in all readers."""
    _assert_every_reader_agrees(builtin_profile(template))
