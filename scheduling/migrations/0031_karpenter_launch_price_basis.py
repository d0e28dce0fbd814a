from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0030_kube_object_daemon_sets'),
    ]

    operations = [
        migrations.AddField(
            model_name='karpenterlaunch',
            name='price_basis',
            field=models.CharField(blank=True, default='list', help_text='Where price_per_hour comes from: "list", "savings-plan" (a Savings Plan rate) or "reserved-instance" (a zonal RI pays for it: $0).', max_length=20),
        ),
        migrations.AlterField(
            model_name='karpenterlaunch',
            name='price_per_hour',
            field=models.FloatField(blank=True, help_text="The paid instance's price (its basis beside it).", null=True),
        ),
        migrations.AlterField(
            model_name='karpenterlaunch',
            name='missed_dollars',
            field=models.FloatField(default=0, help_text='price_per_hour x idle_hours, at price_basis.'),
        ),
        migrations.AlterField(
            model_name='standingopportunity',
            name='savings_per_hour',
            field=models.FloatField(help_text="The nodes' price (list, or what a Savings Plan or zonal Reserved Instance makes it) less the reserved replacement's."),
        ),
    ]
