"""Cairn as a CDK construct library: `from cairn.cdk import CairnService, CairnAddress`.

Needs the `cdk` extra (aws-cdk-lib, constructs, cdk-nag). No Lambda function
imports this package: the functions run `cairn`'s entry points, and the CDK
code stays out of their import path.
"""

from infra.address import CairnAddress
from infra.service import CairnProps, CairnService, WakeTarget

__all__ = ["CairnAddress", "CairnProps", "CairnService", "WakeTarget"]
