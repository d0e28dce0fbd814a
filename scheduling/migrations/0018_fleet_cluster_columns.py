"""The fleet, step 1: a cluster column on every Kubernetes-side model (nullable until fleet's 0002
fills it)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('fleet', '0001_accounts_and_clusters'),
        ('reservations', '0006_fleet_accounts_and_cluster_column'),
        ('scheduling', '0017_refresh_lifecycle'),
    ]

    operations = [
        migrations.AddField(
            model_name='auditentry',
            name='cluster',
            field=models.ForeignKey(blank=True, help_text='The cluster whose scope the change was made in; blank: fleet-wide (sign-ins, accounts, changes made with several clusters and no scope).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='fleet.cluster'),
        ),
        migrations.AddField(
            model_name='controllerguard',
            name='cluster',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='fleet.cluster'),
        ),
        migrations.AddField(
            model_name='decision',
            name='cluster',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='decisions', to='fleet.cluster'),
        ),
        migrations.AddField(
            model_name='karpenterlaunch',
            name='cluster',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='karpenter_launches', to='fleet.cluster'),
        ),
        migrations.AddField(
            model_name='node',
            name='cluster',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='nodes', to='fleet.cluster'),
        ),
        migrations.AddField(
            model_name='nodeclaim',
            name='cluster',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='node_claims', to='fleet.cluster'),
        ),
        migrations.AddField(
            model_name='nodepool',
            name='cluster',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='node_pools', to='fleet.cluster'),
        ),
        migrations.AddField(
            model_name='pod',
            name='cluster',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='pods', to='fleet.cluster'),
        ),
        migrations.AddField(
            model_name='simulatedinstance',
            name='cluster',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='fleet.cluster'),
        ),
        migrations.AddField(
            model_name='standingopportunity',
            name='cluster',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='standing_opportunities', to='fleet.cluster'),
        ),
        migrations.AddField(
            model_name='watchstate',
            name='cluster',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='fleet.cluster'),
        ),
    ]
