import threading
import time

from cairn.dynamodb.waiters import NotifyingWaiter, PollingWaiter


def test_notification_wakes_a_subscribed_waiter_at_once():
    waiter = NotifyingWaiter(recheck_seconds=30)
    woke = threading.Event()

    def wait() -> None:
        with waiter.subscribe("a") as subscription:
            started.set()
            subscription.wait(20)
            woke.set()

    started = threading.Event()
    thread = threading.Thread(target=wait)
    thread.start()
    started.wait(5)
    waiter.notify("a")
    assert woke.wait(5), "the notification did not wake the waiter"
    thread.join()


def test_a_notification_before_waiting_is_not_lost():
    waiter = NotifyingWaiter(recheck_seconds=30)
    with waiter.subscribe("a") as subscription:
        waiter.notify("a")  # an append that commits between the read and the wait
        begun = time.monotonic()
        subscription.wait(20)
        assert time.monotonic() - begun < 5


def test_other_addresses_do_not_wake_a_waiter():
    waiter = NotifyingWaiter(recheck_seconds=30)
    with waiter.subscribe("a") as subscription:
        waiter.notify("b")
        begun = time.monotonic()
        subscription.wait(0.3)
        assert time.monotonic() - begun >= 0.25


def test_polling_waiter_backs_off_but_never_sleeps_past_the_deadline(monkeypatch):
    # The pauses it asks for, not how long the machine took to give them.
    pauses: list[float] = []
    monkeypatch.setattr(threading.Event, "wait", lambda self, timeout=None: pauses.append(timeout) or False)
    with PollingWaiter(first=0.01, longest=0.04).subscribe("a") as subscription:
        for _ in range(5):
            subscription.wait(1.0)
        subscription.wait(0.03)
        subscription.wait(0.0)
    assert pauses == [0.01, 0.02, 0.04, 0.04, 0.04, 0.03, 0.0]


def test_every_append_is_told_to_the_listeners_whatever_its_address():
    # `cairn serve`'s stream reader listens, so that it reads the append's record at once.
    waiter = NotifyingWaiter(recheck_seconds=30)
    told: list[str] = []
    waiter.listen(lambda: told.append("appended"))
    with waiter.subscribe("a"):
        waiter.notify("a")
    waiter.notify("b")
    assert told == ["appended", "appended"]
