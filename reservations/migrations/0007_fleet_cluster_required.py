"""The fleet, step 3: EC2NodeClass.cluster required, its name unique per cluster. A row written
without a cluster gets the working one as it is saved (fleet.managers), so the column has no default."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('fleet', '0002_fleet_of_one'),
        ('reservations', '0006_fleet_accounts_and_cluster_column'),
    ]

    operations = [
        migrations.AlterField(
            model_name='ec2nodeclass',
            name='cluster',
            field=models.ForeignKey(blank=True, on_delete=django.db.models.deletion.CASCADE, related_name='node_classes', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='ec2nodeclass',
            name='name',
            field=models.CharField(max_length=253),
        ),
        migrations.AddConstraint(
            model_name='ec2nodeclass',
            constraint=models.UniqueConstraint(fields=('cluster', 'name'), name='one_nodeclass_name_per_cluster'),
        ),
    ]
