"""A deterministic Nexmark event stream, written from the Nexmark specification's rules.

Event ``i`` (0, 1, 2...) is a person when ``i % 50 == 0``, an auction when ``i % 50`` is 1-3, a bid
otherwise (1 : 3 : 46). Person ids and auction ids count up from 1000 as those events occur; an
auction's seller and a bid's bidder refer to people already made (the most recent
``active_people``, or up to 10 ahead, as the specification's id lead allows), a bid's auction to the
auctions in flight (the latest ``in_flight_auctions``, or up to 10 ahead); "hot" auctions (1 bid in
``hot_auction_ratio``... as the specification: the newest block of 100), sellers and bidders receive
most of the traffic. Prices are log-uniform cents between 1 and 1,000,000 dollars.

Event time advances at ``rate`` events per second from Nexmark's base time (2015-07-15). Delivery is
out of order within ``max_disorder_ms``: each event arrives up to ``max_disorder_ms - 1`` ms after its
event time, so a ``bounded_disorder(max_disorder_ms)`` watermark (and Spark's ``withWatermark`` with
that delay) never calls an in-bound event late, not even at the watermark; a ``late_fraction`` of the
events arrives ``late_delay_ms`` later than that, behind the watermark. Events are written in arrival
order, ``events_per_file`` to a file (one micro-batch each), in the flat JSON lines Beam's Python
Nexmark reads (``ParseJsonEventFn``: a person has ``name``, an auction ``itemName``, a bid
``auction``; times in epoch ms), or as parquet with the same columns.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: Nexmark's base time (2015-07-15T00:00:00Z) in epoch ms.
BASE_TIME = 1_436_918_400_000
FIRST_PERSON_ID = 1_000
FIRST_AUCTION_ID = 1_000
FIRST_CATEGORY_ID = 10
PROPORTION = 50  # person 1, auction 3, bid 46 of every 50 events
PERSONS, AUCTIONS = 1, 3
ID_LEAD = 10  # how far ahead of the newest person/auction a reference may point
HOT_BLOCK = 100  # hot ids are the first of the newest block of 100

FIRST_NAMES = ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"]
LAST_NAMES = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"]
CITIES = ["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent",
          "Cheyenne"]
STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]

#: Every column of the event files: a person's, an auction's and a bid's fields (Beam's names).
SPARK_SCHEMA = ("id bigint, name string, emailAddress string, creditCard string, city string, state string, "
                "dateTime bigint, extra string, itemName string, description string, initialBid bigint, "
                "reserve bigint, expires bigint, seller bigint, category bigint, auction bigint, bidder bigint, "
                "price bigint")
PERSON_FIELDS = ["id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra"]
AUCTION_FIELDS = ["id", "itemName", "description", "initialBid", "reserve", "dateTime", "expires", "seller",
                  "category", "extra"]
BID_FIELDS = ["auction", "bidder", "price", "dateTime", "extra"]


@dataclass(frozen=True)
class NexmarkConfig:
    events: int = 100_000
    seed: int = 1
    #: Events per second of event time.
    rate: int = 10_000
    base_time: int = BASE_TIME
    max_disorder_ms: int = 2_000
    late_fraction: float = 0.0
    late_delay_ms: int = 5_000
    active_people: int = 1_000
    in_flight_auctions: int = 100
    hot_auction_ratio: int = 2
    hot_seller_ratio: int = 4
    hot_bidder_ratio: int = 4

    def __post_init__(self) -> None:
        if self.events < 1 or self.rate < 1 or self.max_disorder_ms < 1:
            raise ValueError(f"events, rate and max_disorder_ms must be positive: {self}")
        if not 0 <= self.late_fraction < 1:
            raise ValueError(f"late_fraction must be in [0, 1), got {self.late_fraction}")


@dataclass(frozen=True)
class Events:
    """The stream in arrival order: one frame per kind (each with ``event_id`` and ``arrival``), and
    all events as one frame with every column (null where a kind has no such field)."""

    persons: pd.DataFrame
    auctions: pd.DataFrame
    bids: pd.DataFrame
    config: NexmarkConfig

    def all(self) -> pd.DataFrame:
        frames = [self.persons, self.auctions, self.bids]
        merged = pd.concat(frames, ignore_index=True, sort=False)
        return merged.sort_values(["arrival", "event_id"], kind="stable").reset_index(drop=True)


def _strings(rng: np.random.Generator, n: int, low: int, high: int) -> list[str]:
    """Random lowercase words with spaces (the specification's strings), ``low`` to ``high`` long."""
    lengths = rng.integers(low, high + 1, n)
    letters = rng.integers(0, 27, int(lengths.sum()))
    chars = np.where(letters == 26, ord(" "), letters + ord("a")).astype(np.uint8).tobytes().decode()
    out, at = [], 0
    for length in lengths:
        out.append(chars[at:at + length].strip() or "x")
        at += length
    return out


def _prices(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.round(10 ** (rng.random(n) * 6) * 100).astype(np.int64)


def _people(rng: np.random.Generator, last_person: np.ndarray, active: int) -> np.ndarray:
    """Base-0 ids of existing people: among the latest ``active`` or up to ``ID_LEAD`` ahead."""
    made = last_person + 1
    window = np.minimum(made, active)
    return made - window + (rng.random(len(made)) * (window + ID_LEAD)).astype(np.int64)


def _auctions(rng: np.random.Generator, last_auction: np.ndarray, in_flight: int) -> np.ndarray:
    low = np.maximum(last_auction - in_flight, 0)
    return low + (rng.random(len(last_auction)) * (last_auction - low + 1 + ID_LEAD)).astype(np.int64)


def generate(config: NexmarkConfig) -> Events:
    rng = np.random.default_rng(config.seed)
    ids = np.arange(config.events, dtype=np.int64)
    epoch, offset = ids // PROPORTION, ids % PROPORTION
    event_time = config.base_time + (ids * 1000) // config.rate
    late = rng.random(config.events) < config.late_fraction
    delay = rng.integers(0, config.max_disorder_ms, config.events)
    arrival = event_time + np.where(late, config.max_disorder_ms + config.late_delay_ms, delay)
    last_person = epoch  # the person of this epoch is made at its offset 0, first of the epoch
    # the newest auction (base 0) when the event occurs: this epoch's made so far, else the last epoch's
    last_auction = np.where(offset < PERSONS, epoch * AUCTIONS - 1,
                            np.where(offset >= PERSONS + AUCTIONS, epoch * AUCTIONS + AUCTIONS - 1,
                                     epoch * AUCTIONS + offset - PERSONS))

    is_person, is_bid = offset < PERSONS, offset >= PERSONS + AUCTIONS
    is_auction = ~is_person & ~is_bid

    p = ids[is_person]
    n = len(p)
    names = [f"{FIRST_NAMES[a]} {LAST_NAMES[b]}" for a, b in
             zip(rng.integers(0, len(FIRST_NAMES), n), rng.integers(0, len(LAST_NAMES), n))]
    emails = [f"{a}@{b}.com" for a, b in zip(_strings(rng, n, 3, 7), _strings(rng, n, 3, 5))]
    cards = [" ".join(f"{g:04d}" for g in groups) for groups in rng.integers(0, 10_000, (n, 4))]
    persons = pd.DataFrame({
        "id": FIRST_PERSON_ID + last_person[is_person], "name": names, "emailAddress": emails, "creditCard": cards,
        "city": np.array(CITIES, dtype=object)[rng.integers(0, len(CITIES), n)],
        "state": np.array(STATES, dtype=object)[rng.integers(0, len(STATES), n)],
        "dateTime": event_time[is_person], "extra": "", "event_id": p, "arrival": arrival[is_person]})

    a = ids[is_auction]
    n = len(a)
    hot_seller = rng.integers(0, config.hot_seller_ratio, n) > 0
    seller = np.where(hot_seller, (last_person[is_auction] // HOT_BLOCK) * HOT_BLOCK,
                      _people(rng, last_person[is_auction], config.active_people))
    initial = _prices(rng, n)
    # an auction lasts about as long as it takes for in_flight_auctions more auctions to open
    horizon = config.in_flight_auctions * PROPORTION // AUCTIONS * 1000 // config.rate
    auctions = pd.DataFrame({
        "id": FIRST_AUCTION_ID + last_auction[is_auction], "itemName": _strings(rng, n, 3, 20),
        "description": _strings(rng, n, 3, 40), "initialBid": initial, "reserve": initial + _prices(rng, n),
        "dateTime": event_time[is_auction],
        "expires": event_time[is_auction] + 1 + rng.integers(0, max(2 * horizon, 1), n),
        "seller": FIRST_PERSON_ID + seller, "category": FIRST_CATEGORY_ID + rng.integers(0, 5, n), "extra": "",
        "event_id": a, "arrival": arrival[is_auction]})

    b = ids[is_bid]
    n = len(b)
    hot_auction = rng.integers(0, config.hot_auction_ratio, n) > 0
    auction = np.where(hot_auction, (last_auction[is_bid] // HOT_BLOCK) * HOT_BLOCK,
                       _auctions(rng, last_auction[is_bid], config.in_flight_auctions))
    hot_bidder = rng.integers(0, config.hot_bidder_ratio, n) > 0
    bidder = np.where(hot_bidder, (last_person[is_bid] // HOT_BLOCK) * HOT_BLOCK + 1,
                      _people(rng, last_person[is_bid], config.active_people))
    bids = pd.DataFrame({
        "auction": FIRST_AUCTION_ID + auction, "bidder": FIRST_PERSON_ID + bidder, "price": _prices(rng, n),
        "dateTime": event_time[is_bid], "extra": "", "event_id": b, "arrival": arrival[is_bid]})
    return Events(*(f.sort_values(["arrival", "event_id"], kind="stable").reset_index(drop=True)
                    for f in (persons, auctions, bids)), config=config)


#: The end-of-input row's event time (windowed_operator.spark.END_OF_INPUT): it moves a native
#: query's watermark past every window too.
END_OF_INPUT = 9_000_000_000_000
#: Integer columns, nullable in the files (each kind has some of them).
INTEGER_COLUMNS = ("id", "dateTime", "initialBid", "reserve", "expires", "seller", "category", "auction", "bidder",
                   "price")


def write_files(events: Events, directory: Path, events_per_file: int, fmt: str = "json",
                end_marker: bool = False) -> int:
    """The stream in arrival order, ``events_per_file`` events a file (file names and modification
    times in order, so ``maxFilesPerTrigger=1`` reads one file a micro-batch); with ``end_marker`` a
    file holds one row ``{"end_of_input": true}`` that ends the input on Spark, and a last one an
    empty row (Beam's reader takes neither: leave them out of files for Beam). Returns the number of
    files."""
    if fmt not in ("json", "parquet"):
        raise ValueError(f"format must be 'json' or 'parquet', got {fmt!r}")
    directory.mkdir(parents=True, exist_ok=True)
    stream = events.all()
    columns = [c.split()[0] for c in SPARK_SCHEMA.split(", ")]
    files = 0

    def write(frame_or_lines: Any) -> None:
        nonlocal files
        path = directory / f"events-{files:05d}.{fmt}"
        if fmt == "parquet":
            frame_or_lines.to_parquet(path, index=False)
        else:
            path.write_text("".join(line + "\n" for line in frame_or_lines))
        os.utime(path, (1_600_000_000 + files, 1_600_000_000 + files))
        files += 1

    for start in range(0, len(stream), events_per_file):
        part = stream.iloc[start:start + events_per_file]
        if fmt == "parquet":
            frame = part.reindex(columns=columns)
            for column in INTEGER_COLUMNS:
                frame[column] = frame[column].astype("Int64")
            write(frame)
        else:
            write([json.dumps({f: _plain(row[f]) for f in _fields_of(row)}) for row in part.to_dict("records")])
    if end_marker:
        marker = {"dateTime": END_OF_INPUT, "end_of_input": True}
        write(pd.DataFrame({k: [v] for k, v in marker.items()}) if fmt == "parquet" else [json.dumps(marker)])
        # and one batch more, of a row of nothing (no event, no time): native Spark's aggregations
        # evict in the batch after their watermark moved, and availableNow runs no batch without data
        write(pd.DataFrame({"dateTime": pd.array([None], dtype="Int64")}) if fmt == "parquet" else ["{}"])
    return files


def _fields_of(row: dict) -> list[str]:
    """A row's own fields, told apart as Beam's parser tells them (name: person, itemName: auction)."""
    if isinstance(row.get("name"), str):
        return PERSON_FIELDS
    return AUCTION_FIELDS if isinstance(row.get("itemName"), str) else BID_FIELDS


def _plain(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
