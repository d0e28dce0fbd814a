import datetime

import factory
from django.utils import timezone

from reservations.models import CapacityReservation, EC2NodeClass, UtilizationSample


class CapacityReservationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = CapacityReservation
        django_get_or_create = ("reservation_id",)

    reservation_id = factory.Sequence(lambda n: f"cr-{n:017x}")
    arn = factory.LazyAttribute(lambda o: f"arn:aws:ec2:us-east-1:{o.owner_id}:capacity-reservation/{o.reservation_id}")
    owner_id = "123456789012"
    region = "us-east-1"
    instance_type = "m5.large"
    availability_zone = "us-east-1a"
    availability_zone_id = "use1-az1"
    total_instance_count = 4
    available_instance_count = 2
    tags = factory.LazyFunction(lambda: {"team": "web"})
    last_seen = factory.LazyFunction(timezone.now)

    class Params:
        capacity_block = factory.Trait(
            reservation_type=CapacityReservation.ReservationType.CAPACITY_BLOCK,
            end_date_type=CapacityReservation.EndDateType.LIMITED,
            end_date=factory.LazyFunction(lambda: timezone.now() + datetime.timedelta(hours=2)),
        )


class UtilizationSampleFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = UtilizationSample

    reservation = factory.SubFactory(CapacityReservationFactory)
    used = 2
    available = 2
    total = 4


class EC2NodeClassFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = EC2NodeClass
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"nodeclass-{n}")
    capacity_reservation_selector_terms = factory.LazyFunction(lambda: [{"tags": {"team": "web"}}])
