"""Seeded pick-task worlds (world.seeded_objects) and moving objects
(Simulation.place_object, what the place_object generator asks for)."""

import math

import pytest

import world
from physics import Simulation


def test_a_seed_gives_the_same_world_and_seeds_differ():
    assert world.seeded_objects(3) == world.seeded_objects(3)
    targets = {tuple(round(v, 3) for v in world.seeded_objects(s)[1].position_m) for s in range(10)}
    assert len(targets) == 10


@pytest.mark.parametrize("seed", range(20))
def test_every_world_keeps_the_way_to_the_red_cube_free(seed):
    objects = world.seeded_objects(seed)
    names = [o.name for o in objects]
    assert names[:2] == ["red_cube_pedestal", "red_cube"]
    target = objects[1]
    assert target.color == "red" and target.movable
    tx, ty = target.position_m[:2]
    assert world.TARGET_DISTANCE_M[0] - 0.5 <= math.hypot(tx, ty) <= world.TARGET_DISTANCE_M[1]
    others = [o for o in objects if not o.name.startswith("red_cube")]
    assert sum(o.name.endswith("_cube") for o in others) == 3
    assert sum(o.name.startswith("obstacle_") for o in others) == 2
    # No other red thing, nothing on the way, nothing at the spawn point or in a wall.
    assert all(o.color != "red" for o in others)
    for o in others:
        x, y = o.position_m[:2]
        assert world._distance_to_segment((x, y), (0, 0), (tx, ty)) >= world.CORRIDOR_HALF_WIDTH_M
        assert math.hypot(x, y) >= world.SPAWN_CLEARANCE_M
        assert max(abs(x), abs(y)) <= world.ROOM_HALF_SIZE_M - world.WALL_MARGIN_M


def test_place_object_moves_a_cube_and_refuses_what_it_cannot(robot):
    sim = Simulation(robot, objects=world.seeded_objects(1))
    sim.place_object("red_cube", 0.5, -0.3, yaw_rad=0.2, z_m=0.3)
    sim.step(200)
    x, y, z = sim.object_positions()["red_cube"]
    assert (round(float(x), 2), round(float(y), 2)) == (0.5, -0.3)
    assert z < 0.05, "a cube placed in the air falls to the floor"
    sim.place_object("obstacle_0", 1.0, 1.0)
    assert [round(float(v), 2) for v in sim.object_positions()["obstacle_0"][:2]] == [1.0, 1.0]
    with pytest.raises(KeyError, match="no object 'unicorn'"):
        sim.place_object("unicorn", 0, 0)
    with pytest.raises(ValueError, match="outside the room"):
        sim.place_object("red_cube", 5.0, 0)
