from django.db import migrations

ROLE = "fleet-admin"


def create_role(apps, schema_editor):
    apps.get_model("auth", "Group").objects.get_or_create(name=ROLE)


def remove_role(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=ROLE).delete()


class Migration(migrations.Migration):
    dependencies = [("fleet", "0005_external_id_by_karpweb_kubeconfig_dir"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(create_role, remove_role)]
