"""The fleet, step 3: every Kubernetes-side row's cluster required, names unique per cluster. A row
written without a cluster gets the working one as it is saved (fleet.managers), so the column
has no default."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('fleet', '0002_fleet_of_one'),
        ('scheduling', '0018_fleet_cluster_columns'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='pod',
            name='unique_pod_per_namespace',
        ),
        migrations.AlterField(
            model_name='auditentry',
            name='cluster',
            field=models.ForeignKey(blank=True, help_text='The cluster whose scope the change was made in; blank: fleet-wide (sign-ins, accounts, changes made with several clusters and no scope).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='controllerguard',
            name='cluster',
            field=models.ForeignKey(blank=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='decision',
            name='cluster',
            field=models.ForeignKey(blank=True, on_delete=django.db.models.deletion.CASCADE, related_name='decisions', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='karpenterlaunch',
            name='cluster',
            field=models.ForeignKey(blank=True, on_delete=django.db.models.deletion.CASCADE, related_name='karpenter_launches', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='node',
            name='cluster',
            field=models.ForeignKey(blank=True, on_delete=django.db.models.deletion.CASCADE, related_name='nodes', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='nodeclaim',
            name='cluster',
            field=models.ForeignKey(blank=True, on_delete=django.db.models.deletion.CASCADE, related_name='node_claims', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='nodepool',
            name='cluster',
            field=models.ForeignKey(blank=True, on_delete=django.db.models.deletion.CASCADE, related_name='node_pools', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='pod',
            name='cluster',
            field=models.ForeignKey(blank=True, on_delete=django.db.models.deletion.CASCADE, related_name='pods', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='simulatedinstance',
            name='cluster',
            field=models.ForeignKey(blank=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='standingopportunity',
            name='cluster',
            field=models.ForeignKey(blank=True, on_delete=django.db.models.deletion.CASCADE, related_name='standing_opportunities', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='watchstate',
            name='cluster',
            field=models.ForeignKey(blank=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='karpenterlaunch',
            name='claim_name',
            field=models.CharField(max_length=253),
        ),
        migrations.AlterField(
            model_name='node',
            name='name',
            field=models.CharField(max_length=253),
        ),
        migrations.AlterField(
            model_name='nodeclaim',
            name='name',
            field=models.CharField(max_length=253),
        ),
        migrations.AlterField(
            model_name='nodepool',
            name='name',
            field=models.CharField(max_length=253),
        ),
        migrations.AddConstraint(
            model_name='controllerguard',
            constraint=models.UniqueConstraint(fields=('cluster',), name='one_controller_guard_per_cluster'),
        ),
        migrations.AddConstraint(
            model_name='karpenterlaunch',
            constraint=models.UniqueConstraint(fields=('cluster', 'claim_name'), name='one_launch_audit_per_claim'),
        ),
        migrations.AddConstraint(
            model_name='node',
            constraint=models.UniqueConstraint(fields=('cluster', 'name'), name='one_node_name_per_cluster'),
        ),
        migrations.AddConstraint(
            model_name='nodeclaim',
            constraint=models.UniqueConstraint(fields=('cluster', 'name'), name='one_nodeclaim_name_per_cluster'),
        ),
        migrations.AddConstraint(
            model_name='nodepool',
            constraint=models.UniqueConstraint(fields=('cluster', 'name'), name='one_nodepool_name_per_cluster'),
        ),
        migrations.AddConstraint(
            model_name='pod',
            constraint=models.UniqueConstraint(fields=('cluster', 'namespace', 'name'), name='unique_pod_per_cluster_namespace'),
        ),
        migrations.AddConstraint(
            model_name='watchstate',
            constraint=models.UniqueConstraint(fields=('cluster',), name='one_watch_state_per_cluster'),
        ),
    ]
