from django.conf import settings
from django.contrib.auth import views as auth_views

from accounts.oidc import REFUSAL_KEY, oidc_enabled


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
