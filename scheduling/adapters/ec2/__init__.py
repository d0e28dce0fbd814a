"""The EC2 adapter: reservation discovery, catalogue and prices, launches into reservations,
membership and termination, on boto3. See docs/ec2.md."""

from .client import EC2Config
from .interface import (
    ON_DEMAND,
    RESERVED,
    SPOT,
    Catalogue,
    CloudAPIError,
    CloudProvider,
    InstanceMembership,
    InstanceTypeInfo,
    LaunchError,
    LaunchOffering,
    LaunchRequest,
    LaunchResult,
    OfferingInfo,
    SelectorTermsError,
    TerminateResult,
)
from .provider import EC2CloudProvider

__all__ = [
    "ON_DEMAND",
    "RESERVED",
    "SPOT",
    "Catalogue",
    "CloudAPIError",
    "CloudProvider",
    "EC2CloudProvider",
    "EC2Config",
    "InstanceMembership",
    "InstanceTypeInfo",
    "LaunchError",
    "LaunchOffering",
    "LaunchRequest",
    "LaunchResult",
    "OfferingInfo",
    "SelectorTermsError",
    "TerminateResult",
]
