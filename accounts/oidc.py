"""Single sign-on through an OpenID Connect provider, with mozilla-django-oidc: the authorization
code flow with PKCE, state and nonce (the library checks them), an ID token signed by a key from the
provider's JWKS, claims from its userinfo endpoint.

What karpweb adds: endpoints from the provider's discovery document (KARPWEB_OIDC_ISSUER, fetched
when first needed and cached, so a provider that is down never stops a local break-glass sign-in);
accounts matched by issuer and subject; roles from the group claim, re-evaluated at every sign-in
(a removed group loses its role, no mapped group refuses the sign-in); every sign-in, refusal and
role change in the audit log."""

import hashlib
import logging

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.core.exceptions import SuspiciousOperation
from django.db import IntegrityError, transaction
from django.shortcuts import redirect
from django.utils import timezone
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from accounts.models import SignInIdentity
from karpweb.roles import ADMIN, OPERATOR, VIEWER, roles_from_groups, user_roles
from accounts.signals import record_sign_in
from scheduling.audit import record_change
from scheduling.models import AuditEntry

log = logging.getLogger(__name__)
DISCOVERY_SECONDS = 3600
REFUSAL_KEY = "karpweb_sign_in_refusal"


class ProviderError(Exception):
    """The identity provider could not be used; the message says why, for the sign-in page."""


def oidc_enabled() -> bool:
    return bool(settings.KARPWEB_OIDC_ISSUER)


def discovery() -> dict:
    """The provider's /.well-known/openid-configuration, cached for an hour."""
    issuer = settings.KARPWEB_OIDC_ISSUER.rstrip("/")
    key = "karpweb:oidc-discovery:" + hashlib.sha256(issuer.encode()).hexdigest()[:16]
    document = cache.get(key)
    if document is not None:
        return document
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT, verify=settings.OIDC_VERIFY_SSL)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderError(f"the identity provider's discovery document ({url}) could not be read: "
                            f"{exc.__class__.__name__}") from None
    if not isinstance(document, dict) or document.get("issuer", "").rstrip("/") != issuer:
        raise ProviderError(f"the discovery document at {url} names issuer {document.get('issuer')!r} "
                            f"(KARPWEB_OIDC_ISSUER is {issuer!r}); the two must be equal")
    missing = [name for name in ("authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri")
               if not document.get(name)]
    if missing:
        raise ProviderError(f"the discovery document at {url} lacks {', '.join(missing)}")
    cache.set(key, document, DISCOVERY_SECONDS)
    return document


class KarpwebOIDCBackend(OIDCAuthenticationBackend):
    """Endpoints are read from discovery when a sign-in needs them, not when Django builds the
    backends (it builds every backend for every sign-in, local ones included)."""

    def __init__(self, *args, **kwargs):  # the parent's reads every endpoint from settings
        self.UserModel = get_user_model()
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None

    OIDC_OP_TOKEN_ENDPOINT = property(lambda self: discovery()["token_endpoint"])
    OIDC_OP_USER_ENDPOINT = property(lambda self: discovery()["userinfo_endpoint"])
    OIDC_OP_JWKS_ENDPOINT = property(lambda self: discovery()["jwks_uri"])

    def authenticate(self, request, **kwargs):
        # Only the callback passes a nonce; a local sign-in never reaches the provider.
        if not oidc_enabled() or request is None or "nonce" not in kwargs:
            return None
        try:
            return super().authenticate(request, **kwargs)
        except ProviderError as exc:
            _refuse(request, str(exc))
            return None
        except requests.RequestException as exc:
            _refuse(request, f"the identity provider did not answer ({exc.__class__.__name__})")
            return None

    def verify_claims(self, claims):
        return bool(claims.get("sub"))

    def get_or_create_user(self, access_token, id_token, payload):
        claims = self.get_userinfo(access_token, id_token, payload)
        if not self.verify_claims(claims) or claims.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("the userinfo subject is missing or differs from the ID token's")
        groups = _groups(claims)
        roles = roles_from_groups(groups, settings.KARPWEB_OIDC_VIEWER_GROUPS, settings.KARPWEB_OIDC_OPERATOR_GROUPS,
                                  settings.KARPWEB_OIDC_ADMIN_GROUPS)
        issuer = settings.KARPWEB_OIDC_ISSUER.rstrip("/")
        identity = SignInIdentity.objects.filter(issuer=issuer, subject=claims["sub"]).select_related("user").first()
        if identity is not None and not identity.user.is_active:
            return _refuse(self.request, f"the karpweb account {identity.user.username} is disabled", identity.user)
        if not roles:
            if identity is not None:
                apply_roles(identity.user, set(), self.request)
            shown = ", ".join(groups) or "none"
            return _refuse(self.request, f"{_name(claims)} is in none of the groups that give a karpweb role "
                                         f"(their {settings.KARPWEB_OIDC_GROUPS_CLAIM} claim: {shown})",
                           identity.user if identity else None)
        if identity is None:
            identity = _new_identity(issuer, claims)
        user = identity.user
        user.email = claims.get("email") or user.email
        user.first_name = (claims.get("given_name") or claims.get("name") or user.first_name)[:150]
        user.last_name = (claims.get("family_name") or user.last_name)[:150]
        user.save(update_fields=["email", "first_name", "last_name"])
        SignInIdentity.objects.filter(pk=identity.pk).update(groups=groups, last_sign_in_at=timezone.now())
        apply_roles(user, roles, self.request)
        return user


def _groups(claims: dict) -> list[str]:
    value = claims.get(settings.KARPWEB_OIDC_GROUPS_CLAIM) or []
    if isinstance(value, str):
        value = [value]
    return sorted(str(group) for group in value if isinstance(group, (str, int)))


def _name(claims: dict) -> str:
    return str(claims.get(settings.KARPWEB_OIDC_USERNAME_CLAIM) or claims.get("email") or claims["sub"])


def _new_identity(issuer: str, claims: dict) -> SignInIdentity:
    """A new account for a first sign-in. Its username is the username claim unless a local account
    already has it (then the subject's digest is added: a provider never takes over a local account)."""
    User = get_user_model()
    wanted = _name(claims)[:150]
    username = wanted
    if User.objects.filter(username=username).exists():
        username = f"{wanted[:140]}-{hashlib.sha256(claims['sub'].encode()).hexdigest()[:8]}"
    try:
        with transaction.atomic():
            user = User.objects.create_user(username, email=claims.get("email") or "")
            user.set_unusable_password()  # signs in through the provider only
            user.save(update_fields=["password"])
            return SignInIdentity.objects.create(user=user, issuer=issuer, subject=claims["sub"])
    except IntegrityError:
        # The same person's first sign-in in two tabs at once: the other one made the account.
        return SignInIdentity.objects.select_related("user").get(issuer=issuer, subject=claims["sub"])


def apply_roles(user, roles: set[str], request) -> None:
    """Make the account hold exactly `roles`; a change is one audit entry."""
    before = user_roles(user)
    if before == roles:
        return
    viewer, _ = Group.objects.get_or_create(name=VIEWER)
    operator, _ = Group.objects.get_or_create(name=OPERATOR)
    for role, group in ((VIEWER, viewer), (OPERATOR, operator)):
        (user.groups.add if role in roles else user.groups.remove)(group)
    user.is_staff = user.is_superuser = ADMIN in roles
    user.save(update_fields=["is_staff", "is_superuser"])
    user.__dict__.pop("_karpweb_groups", None)
    record_change(user=user, source=AuditEntry.Source.UI, obj=user, action=AuditEntry.Action.CHANGE,
                  changes={"roles": [sorted(before), sorted(roles)],
                           "reason": [None, f"groups from {settings.KARPWEB_OIDC_ISSUER} at sign-in"]})


def _refuse(request, why: str, user=None):
    """A sign-in the provider vouched for but karpweb refuses: told on the sign-in page, audited."""
    log.warning("single sign-on refused: %s", why)
    if request is not None and hasattr(request, "session"):
        request.session[REFUSAL_KEY] = why
    record_sign_in(user, request, AuditEntry.Action.REFUSED, {"reason": [None, why]})
    return None


class SignInView(OIDCAuthenticationRequestView):
    """Off to the provider; a provider that cannot be used is said on the sign-in page."""

    def __init__(self, *args, **kwargs):  # the parent's reads the endpoint from settings
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID

    OIDC_OP_AUTH_ENDPOINT = property(lambda self: discovery()["authorization_endpoint"])

    def get(self, request):
        if not oidc_enabled():
            return redirect(settings.LOGIN_URL)
        try:
            discovery()
        except ProviderError as exc:
            request.session[REFUSAL_KEY] = str(exc)
            return redirect(settings.LOGIN_URL)
        return super().get(request)


class CallbackView(OIDCAuthenticationCallbackView):
    """Sessions that came through the provider last KARPWEB_OIDC_SESSION_HOURS: a person the
    provider no longer lets in loses karpweb at the latest then."""

    def login_success(self):
        response = super().login_success()
        self.request.session.set_expiry(settings.KARPWEB_OIDC_SESSION_HOURS * 3600)
        return response
