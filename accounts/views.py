from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.shortcuts import redirect
from django.views.generic import TemplateView
from knox.models import AuthToken

from accounts.oidc import REFUSAL_KEY, oidc_enabled
from accounts.tokens import TokenRefused, create_token, revoke_token
from karpweb.clientaddr import client_address
from karpweb.roles import ViewerRequiredMixin
from scheduling.models import AuditEntry


class SignInPageView(auth_views.LoginView):
    """The sign-in page: the identity provider's button when single sign-on is on, the local form
    while local accounts are on, and why the last single sign-on was refused."""

    def post(self, request, *args, **kwargs):
        if not settings.KARPWEB_LOCAL_LOGIN:
            context = self.get_context_data(local_refusal=(
                "Sign-in with a karpweb password is switched off (KARPWEB_LOCAL_LOGIN=false); "
                f"use {settings.KARPWEB_OIDC_NAME}."))
            return self.render_to_response(context, status=403)
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "oidc_enabled": oidc_enabled(),
                "oidc_name": settings.KARPWEB_OIDC_NAME, "local_login": settings.KARPWEB_LOCAL_LOGIN,
                "sso_refusal": self.request.session.pop(REFUSAL_KEY, "")}


class APITokensView(ViewerRequiredMixin, TemplateView):
    """The signed-in user's own API tokens: make one (its key is shown on this answer only), see when
    each expires, revoke one. A token acts with its user's role (docs/api.md)."""

    template_name = "accounts/api_tokens.html"

    def get_context_data(self, **kwargs):
        from accounts.models import TokenNarrowing
        from fleet.models import Cluster

        tokens = list(AuthToken.objects.filter(user=self.request.user).order_by("-created"))
        narrowings = {n.token_key: n for n in TokenNarrowing.objects.select_related("cluster").filter(
            token_key__in=[t.token_key for t in tokens])}
        for token in tokens:
            token.narrowing = narrowings.get(token.token_key)
        return {**super().get_context_data(**kwargs), "tokens": tokens, "token_days": settings.KARPWEB_API_TOKEN_DAYS,
                "clusters": Cluster.objects.order_by("name").values_list("name", flat=True)}

    def post(self, request):
        where = {"actor": request.user, "source": AuditEntry.Source.UI, "address": client_address(request)}
        if "revoke" in request.POST:
            token = AuthToken.objects.filter(user=request.user, token_key=request.POST["revoke"][:25]).first()
            if token is not None:
                revoke_token(token, **where)
            messages.info(request, "Token revoked." if token else "No such token (already revoked or expired).")
            return redirect("api_tokens")
        cluster = None
        if request.POST.get("cluster"):
            from fleet.models import Cluster

            cluster = Cluster.objects.filter(name=request.POST["cluster"][:63]).first()  # those the user sees
            if cluster is None:
                messages.error(request, "cluster: no cluster you can see has that name; no token made.")
                return redirect("api_tokens")
        try:
            token, key = create_token(request.user, read_only=request.POST.get("read_only") == "on", cluster=cluster,
                                      **where)
        except TokenRefused as exc:
            messages.error(request, f"No token made: {exc}.")
            return redirect("api_tokens")
        # No redirect: the key is in this response only, never stored, never shown again.
        return self.render_to_response(self.get_context_data(new_key=key, new_token=token))
