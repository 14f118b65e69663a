#!/usr/bin/env python3
# Usage: python3 make_kubectl_get.py xpk_pathways_v5p-8_at_254bbe3f.yaml > xpk_pathways_v5p-8_at_254bbe3f_kubectl_get.yaml (needs PyYAML).
# Builds a `kubectl get jobset golden-workload -o yaml` of the applied xpk render: the render's
# fields plus what the API server adds (Kubernetes API conventions: ObjectMeta, managedFields
# FieldsV1, client-side apply's last-applied annotation; JobSet status per the CRD), emitted as
# kubectl does (keys sorted, block style, multi-line strings as literal blocks).
import json, sys, yaml
from typing import Any

src = yaml.safe_load(open(sys.argv[1]))


def fields(node: Any) -> dict[str, Any]:
  """The FieldsV1 set of `node`: every key, and every list item by its name."""
  if isinstance(node, dict):
    out: dict[str, Any] = {".": {}} if node else {}
    for k, v in node.items():
      out["f:" + k] = fields(v)
    return out
  if isinstance(node, list) and node and all(isinstance(i, dict) and "name" in i for i in node):
    out = {".": {}}
    for i in node:
      out['k:{"name":"%s"}' % i["name"]] = fields(i)
    return out
  return {}


applied = json.dumps(src, separators=(",", ":"), sort_keys=True) + "\n"
live = json.loads(json.dumps(src))
meta = live["metadata"]
meta.setdefault("annotations", {})["kubectl.kubernetes.io/last-applied-configuration"] = applied
meta["namespace"] = "default"  # kubectl apply without -n: the server stores the namespace
meta["creationTimestamp"] = "2026-03-18T10:15:02Z"
meta["generation"] = 1
meta["resourceVersion"] = "1742291"
meta["uid"] = "5f0c7a1e-3b9d-4c2a-9e51-8d6f2b7a4c13"
client = {k: v for k, v in src.items() if k in ("metadata", "spec")}
client_fields = fields(client)
client_fields["f:metadata"]["f:annotations"] = {
    ".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}
}
status_fields: dict[str, Any] = {
    "f:status": {".": {}, "f:replicatedJobsStatus": {}, "f:restarts": {}},
}
meta["managedFields"] = [
    {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "fieldsType": "FieldsV1",
        "fieldsV1": {k: v for k, v in client_fields.items() if k != "."},
        "manager": "kubectl-client-side-apply",
        "operation": "Update",
        "time": "2026-03-18T10:15:02Z",
    },
    {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "fieldsType": "FieldsV1",
        "fieldsV1": status_fields,
        "manager": "manager",
        "operation": "Update",
        "subresource": "status",
        "time": "2026-03-18T10:15:09Z",
    },
]
job_status = {"active": 1, "failed": 0, "ready": 1, "succeeded": 0, "suspended": 0}
live["status"] = {
    "replicatedJobsStatus": [
        dict(job_status, name=j["name"]) for j in src["spec"]["replicatedJobs"]
    ],
    "restarts": 0,
}


class Dumper(yaml.SafeDumper):
  pass


def text(dumper, value):
  style = "|" if "\n" in value else None
  return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


Dumper.add_representer(str, text)
output = yaml.dump(live, Dumper=Dumper, sort_keys=True, default_flow_style=False, width=1 << 20,
                   indent=2)
sys.stdout.write(output)
