#!/usr/bin/env python3
"""Checks every expected response in tests/vectors/*.json against docs/openapi.yaml.

For each HTTP step (and each gateway `open` step) the expected status must be
documented for that path and method, and the expected body must fit the
response schema. Steps on a path or method the description does not list
(unknown paths, wrong HTTP methods) must be 404 / 405 error envelopes.

Wildcards: the vectors' expected string "{{*}}" matches anything, and a
whole-string placeholder "{{name}}" stands for a value saved from an earlier
response (which was itself checked). A validation error whose failing value is
such a string is ignored; for oneOf/anyOf, a branch whose only errors are
those counts as matching. Every other error fails the check.

The check proves it can fail: a valid vector response mutated in several ways
must be rejected, or this script exits non-zero.

Usage: python3 tests/openapi_vectors.py   (needs jsonschema and pyyaml)
"""
import copy
import glob
import json
import os
import re
import sys

import jsonschema
import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SPEC = yaml.safe_load(open(os.path.join(ROOT, "docs", "openapi.yaml")))
PLACEHOLDER = re.compile(r"^\{\{[^{}]+\}\}$")


def schema_for(sub):
    """A validator for `sub`, resolving #/components refs in the spec."""
    doc = dict(sub)
    doc["components"] = SPEC["components"]
    return jsonschema.Draft202012Validator(doc)


def resolve(obj):
    while isinstance(obj, dict) and "$ref" in obj:
        node = SPEC
        for part in obj["$ref"][2:].split("/"):
            node = node[part]
        obj = node
    return obj


def ignorable(err):
    if isinstance(err.instance, str) and PLACEHOLDER.match(err.instance):
        return True
    if err.validator in ("oneOf", "anyOf") and err.context:
        branches = {}
        for e in err.context:
            branches.setdefault(e.relative_schema_path[0], []).append(e)
        # A branch that failed only on wildcards matches. (Branches with no
        # errors do not appear in context: then the error is a real one, e.g.
        # "valid under more than one".)
        return any(all(ignorable(e) for e in errs) for errs in branches.values())
    return False


def real_errors(validator, body):
    return [e for e in validator.iter_errors(body) if not ignorable(e)]


# The console page's other addresses (described with /admin/console).
PATH_ALIASES = {"/admin/console/": "/admin/console", "/admin/console/index.html": "/admin/console"}


def request_path(target):
    """The path a request target names: an absolute-form URL's path (RFC
    9112 section 3.2.2), without the query."""
    m = re.match(r"(?i)^https?://[^/?]*", target)
    if m:
        target = target[m.end():] or "/"
    return target.split("?")[0]


def response_spec(method, path, status, body=None):
    """The response object, or an error string."""
    path = PATH_ALIASES.get(path, path)
    if status == 400 and isinstance(body, dict) and str(body.get("description", "")).startswith("the request target is not valid"):
        # Refused before routing: no path of the API is involved.
        return resolve({"$ref": "#/components/responses/BadRequest"}), None
    item = SPEC["paths"].get(path)
    if item is None:
        if status != 404:
            return None, f"path {path} is not described and the status is {status}, not 404"
        return {"content": {"application/json": {"schema": {"$ref": "#/components/responses/NotFound"}}}}, None
    op = item.get(method.lower())
    if op is None:
        if status != 405:
            return None, f"{method} {path} is not described and the status is {status}, not 405"
        return resolve({"$ref": "#/components/responses/MethodNotAllowed"}), None
    resp = op["responses"].get(str(status))
    if resp is None:
        return None, f"{method} {path}: status {status} is not documented"
    return resolve(resp), None


def body_schema(resp):
    content = resp.get("content")
    if not content:
        return None
    if "application/json" not in content:
        return None  # the console's files: HTML, script, style
    schema = content["application/json"]["schema"]
    if "$ref" in schema and schema["$ref"].startswith("#/components/responses/"):
        return body_schema(resolve(schema))
    return schema


def check_rate_headers(method, path, status, resp, expected):
    """X-RateLimit-* headers a vector expects must be documented for that
    response and fit their schema; one a vector expects absent (null) must
    not be documented as required."""
    documented = {k.lower(): resolve(v) for k, v in (resp.get("headers") or {}).items()}
    problems = []
    for name, value in expected.items():
        if not name.lower().startswith("x-ratelimit-"):
            continue
        doc = documented.get(name.lower())
        if value is None:
            if doc is not None and doc.get("required"):
                problems.append(f"{method} {path} {status}: header {name} is expected absent but documented as required")
            continue
        if doc is None:
            problems.append(f"{method} {path} {status}: header {name} is not documented")
            continue
        problems += [f"{method} {path} {status}: header {name}: {e.message}"
                     for e in schema_for(doc["schema"]).iter_errors(value)]
    return problems


def check_step(method, path, expect):
    """Returns a list of problems for one expected response."""
    status = expect["status"]
    resp, err = response_spec(method, path, status, expect.get("body"))
    if err:
        return [err]
    header_problems = check_rate_headers(method, path, status, resp, expect.get("headers") or {})
    if header_problems:
        return header_problems
    schema = body_schema(resp)
    if "body" not in expect:
        return []
    if schema is None:
        return [f"{method} {path} {status}: a body is expected but none is documented"]
    return [f"{method} {path} {status}: {e.message} at {list(e.absolute_path)}"
            for e in real_errors(schema_for(schema), expect["body"])]


def steps():
    for f in sorted(glob.glob(os.path.join(ROOT, "tests", "vectors", "*.json"))):
        for case in json.load(open(f))["cases"]:
            for i, s in enumerate(case["steps"]):
                if "gateway" in s:
                    if s["gateway"] != "open" or "expect" not in s or "status" not in s["expect"]:
                        continue  # frames are not HTTP; docs/gateway.md describes them
                    method, path = "GET", "/bot/gateway"
                else:
                    method, path = s["request"]["method"], request_path(s["request"]["path"])
                if "expect" in s and "status" in s["expect"]:
                    yield f"{os.path.basename(f)}: {case['name']} step {i}", method, path, s["expect"]


def self_test(all_steps):
    """Mutations of real vector responses must be rejected."""
    ok_send = next(e for _, m, p, e in all_steps if p == "/bot/sendMessage" and e["status"] == 200 and "body" in e)
    err_400 = next(e for _, m, p, e in all_steps if e["status"] == 400 and "body" in e)
    mutants = []
    m = copy.deepcopy(ok_send); m["body"]["result"]["date"] = "yesterday"; mutants.append(("sendMessage", m))
    m = copy.deepcopy(ok_send); m["body"]["result"]["surprise"] = 1; mutants.append(("sendMessage", m))
    m = copy.deepcopy(ok_send); del m["body"]["result"]["chat"]; mutants.append(("sendMessage", m))
    m = copy.deepcopy(ok_send); m["status"] = 418; mutants.append(("sendMessage", m))
    m = copy.deepcopy(err_400); m["body"]["error"] = "made_up_code"; mutants.append(("sendMessage", m))
    m = copy.deepcopy(err_400); m["body"]["error_code"] = 403; mutants.append(("sendMessage", m))
    m = copy.deepcopy(err_400); m["body"]["ok"] = True; mutants.append(("sendMessage", m))
    limited = next(e for _, m, p, e in all_steps if p == "/bot/sendMessage" and "X-RateLimit-Reset-After" in e.get("headers", {})
                   and e["headers"]["X-RateLimit-Reset-After"] is not None)
    m = copy.deepcopy(limited); m["headers"]["X-RateLimit-Reset-After"] = "0.0340"; mutants.append(("sendMessage", m))
    m = copy.deepcopy(limited); m["headers"]["X-RateLimit-Scope"] = "everything"; mutants.append(("sendMessage", m))
    m = copy.deepcopy(limited); m["headers"]["X-RateLimit-Unknown"] = "1"; mutants.append(("sendMessage", m))
    failed = 0
    for name, mut in mutants:
        if not check_step("POST", f"/bot/{name}", mut):
            print(f"SELF-TEST FAILED: a mutated response was accepted: {json.dumps(mut)[:200]}")
            failed += 1
    # And an unmutated one is accepted, so the mutants fail for their mutation.
    for original in (ok_send, limited):
        if check_step("POST", "/bot/sendMessage", original):
            print("SELF-TEST FAILED: the original sendMessage response was rejected")
            failed += 1
    return failed, len(mutants)


def main():
    jsonschema.Draft202012Validator.check_schema({"components": SPEC["components"]})
    all_steps = list(steps())
    problems = 0
    for where, method, path, expect in all_steps:
        for p in check_step(method, path, expect):
            print(f"{where}: {p}")
            problems += 1
    failed, n = self_test(all_steps)
    print(f"openapi: {len(all_steps)} expected responses checked, {problems} problems; "
          f"{n} mutated responses, {failed} wrongly accepted")
    sys.exit(1 if problems or failed else 0)


if __name__ == "__main__":
    main()
