from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('reservations', '0022_lend_and_reclaim'),
    ]

    operations = [
        migrations.CreateModel(
            name='PriceCommitments',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('account_id', models.CharField(blank=True, help_text="The AWS account (blank: karpweb's own credentials' account, a fleet of one).", max_length=12, verbose_name='account ID')),
                ('region', models.CharField(max_length=32)),
                ('reserved_instances', models.JSONField(blank=True, default=list, help_text='Active zonal Reserved Instances, as DescribeReservedInstances writes them.')),
                ('savings_plans', models.JSONField(blank=True, default=list, help_text='Active Compute and EC2 Instance Savings Plans, each with its Linux/UNIX rates here.')),
                ('list_prices_because', models.JSONField(blank=True, default=list, help_text='What could not be read, e.g. "no permission to read Reserved Instances".')),
                ('read_at', models.DateTimeField()),
            ],
            options={
                'verbose_name_plural': 'price commitments',
                'ordering': ['account_id', 'region'],
                'constraints': [models.UniqueConstraint(fields=('account_id', 'region'), name='one_price_commitments_per_account_region')],
            },
        ),
        migrations.AlterField(
            model_name='recommendation',
            name='savings_per_month',
            field=models.FloatField(help_text="Dollars a month (730 hours) at its price basis (list, or a Savings Plan's rate)."),
        ),
    ]
