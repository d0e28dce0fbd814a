from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.shortcuts import redirect
from django.views.generic import TemplateView
from knox.models import AuthToken

from accounts.oidc import REFUSAL_KEY, oidc_enabled
from accounts.tokens import create_token
from karpweb.roles import ViewerRequiredMixin


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
        tokens = AuthToken.objects.filter(user=self.request.user).order_by("-created")
        return {**super().get_context_data(**kwargs), "tokens": tokens, "token_days": settings.KARPWEB_API_TOKEN_DAYS}

    def post(self, request):
        if "revoke" in request.POST:
            deleted, _ = AuthToken.objects.filter(user=request.user, token_key=request.POST["revoke"][:25]).delete()
            messages.info(request, "Token revoked." if deleted else "No such token (already revoked or expired).")
            return redirect("api_tokens")
        token, key = create_token(request.user)
        # No redirect: the key is in this response only, never stored, never shown again.
        return self.render_to_response(self.get_context_data(new_key=key, new_token=token))
