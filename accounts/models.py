from django.conf import settings
from django.db import models
from django.utils import timezone


class SignInIdentity(models.Model):
    """A karpweb account's identity at an OpenID Connect provider: matched by issuer and subject
    (never by e-mail, which a provider may let people change, and which a local break-glass account
    could share)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sign_in_identity")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255, help_text="The provider's `sub` claim.")
    groups = models.JSONField(default=list, blank=True, help_text="The group claim at the last sign-in.")
    last_sign_in_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "sign-in identities"
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="one_account_per_identity")]

    def __str__(self):
        return f"{self.user} ({self.subject} at {self.issuer})"


class TokenNarrowing(models.Model):
    """What an API token may do beyond being its user's: read only, and/or one cluster alone. Made with
    the token (the page, `manage.py api_token --read-only --cluster NAME`); fleet/access.py applies it."""

    token_key = models.CharField(max_length=25, unique=True, help_text="The token's first characters (knox's token_key).")
    read_only = models.BooleanField(default=False)
    cluster = models.ForeignKey("fleet.Cluster", null=True, blank=True, on_delete=models.CASCADE, related_name="+")

    def __str__(self):
        parts = (["read-only"] if self.read_only else []) + ([f"cluster {self.cluster.name}"] if self.cluster_id else [])
        return f"token {self.token_key}: {', '.join(parts) or 'as its user'}"
