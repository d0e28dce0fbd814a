"""The fleet, step 1: which accounts see a reservation, its owner account, and EC2NodeClass.cluster
(nullable until fleet's 0002 fills it)."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('fleet', '0001_accounts_and_clusters'),
        ('reservations', '0005_recommendations'),
    ]

    operations = [
        migrations.CreateModel(
            name='ReservationVisibility',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('shared', models.BooleanField(default=False, help_text='Seen through a RAM share; false: the account owns it.')),
                ('first_seen', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'ordering': ['reservation', 'account'],
            },
        ),
        migrations.AddField(
            model_name='capacityreservation',
            name='owner_account',
            field=models.ForeignKey(blank=True, help_text="The owner, when it is one of the fleet's accounts (owner_id names it either way).", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='owned_reservations', to='fleet.awsaccount'),
        ),
        migrations.AddField(
            model_name='ec2nodeclass',
            name='cluster',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='node_classes', to='fleet.cluster'),
        ),
        migrations.AddField(
            model_name='reservationvisibility',
            name='account',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='visible_reservations', to='fleet.awsaccount'),
        ),
        migrations.AddField(
            model_name='reservationvisibility',
            name='reservation',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='visibilities', to='reservations.capacityreservation'),
        ),
        migrations.AddConstraint(
            model_name='reservationvisibility',
            constraint=models.UniqueConstraint(fields=('reservation', 'account'), name='one_visibility_per_account'),
        ),
    ]
