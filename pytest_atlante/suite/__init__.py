"""The suite: documents in, a validated suite out.

Configuration and scenario documents (JSON/JSONC with locations), packs, discovery of the
project's scenarios and fixtures, the native build of the harness, the scripted model's script
document and the comparability digests.  Nothing here runs a host or knows pytest.
"""
