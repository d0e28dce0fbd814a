# karpweb: one image, four roles (web, worker, beat, watch), chosen by the command.
#   docker build -t karpweb .
#   web:    gunicorn karpweb.wsgi -b 0.0.0.0:8000 --workers 3
#   worker: celery -A karpweb worker --loglevel=INFO
#   beat:   celery -A karpweb beat --loglevel=INFO
#   watch:  python manage.py watch   (a real cluster: watches and batch windows; one replica leads)
# Not 3.13 yet, though 3.13.13 fixes a frame-stack thrash that costs one page 40 ms here: the
# Kubernetes adapter now verifies EKS's cluster CA on 3.13 (without urllib3's VERIFY_X509_STRICT);
# what remains is measuring the pages on 3.13.13 (docs/operations.md#performance).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app

COPY pyproject.toml ./
COPY accounts ./accounts
COPY karpweb ./karpweb
COPY reservations ./reservations
COPY scheduling ./scheduling
COPY templates ./templates
COPY static ./static
COPY deploy/crds ./deploy/crds
COPY manage.py ./
RUN pip install . && useradd --uid 10001 --no-create-home karpweb \
    && SECRET_KEY=collectstatic-only python manage.py collectstatic --no-input -v 0

USER 10001
EXPOSE 8000
CMD ["gunicorn", "karpweb.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
