"""The Colosseum scene's asset banks: Colosseum's 20 colours, the texture bank (packaged images
and procedural builtins) and the distractor pool (`scene` adds them to every task's model).

126 textures: MetaWorld's 32 images, labmaze's 71 wall, floor and ceiling textures (labmaze is
installed with dm_control) and 23 procedural MuJoCo builtins in Colosseum's colours. 70
distractors: 5 made of several MetaWorld meshes, 58 single MetaWorld meshes fitted to ~10 cm
and 7 primitive objects.
"""
from __future__ import annotations

import dataclasses
import os

# The Colosseum's 20 colours (robot-colosseum colosseum/variations/const.py), in its order.
COLOURS: dict[str, tuple[float, float, float]] = {
    "red": (1.0, 0.0, 0.0), "maroon": (0.5, 0.0, 0.0), "lime": (0.0, 1.0, 0.0),
    "green": (0.0, 0.5, 0.0), "blue": (0.0, 0.0, 1.0), "navy": (0.0, 0.0, 0.5),
    "yellow": (1.0, 1.0, 0.0), "cyan": (0.0, 1.0, 1.0), "magenta": (1.0, 0.0, 1.0),
    "silver": (0.75, 0.75, 0.75), "gray": (0.5, 0.5, 0.5), "orange": (1.0, 0.5, 0.0),
    "olive": (0.5, 0.5, 0.0), "purple": (0.5, 0.0, 0.5), "teal": (0.0, 0.5, 0.5),
    "azure": (0.0, 0.5, 1.0), "violet": (0.5, 0.0, 1.0), "rose": (1.0, 0.0, 0.5),
    "black": (0.0, 0.0, 0.0), "white": (1.0, 1.0, 1.0)}


@dataclasses.dataclass(frozen=True)
class Texture:
  """An image file under a package's assets (`package`: metaworld or labmaze), or a MuJoCo
  builtin (checker/gradient/flat)."""
  name: str
  file: str = ""
  builtin: str = ""
  rgb1: str = "white"
  rgb2: str = "black"
  mark: str = "none"     # Builtin marks: none, edge, cross, random.
  package: str = "metaworld"


_IMAGES = ("textures/wood1.png", "textures/wood3.png", "textures/wood4.png",
           "textures/darkwood.png", "textures/light_wood_v2.png", "textures/granite.png",
           "textures/marble.png", "textures/brick1.png", "textures/metal2.png",
           "textures/navy_blue.png", "textures/tennis.png", "textures/real_door.png",
           "textures/floor1.png", "textures/plaster1.png", "scene/textures/fabricPattern.png",
           "scene/textures/fabricPlain.png", "scene/textures/white_marble_tile.png",
           "scene/textures/metal1.png")
# MetaWorld's other images, and labmaze's wall and floor textures (its five maze styles).
_MORE_IMAGES = ("textures/floor2.png", "textures/light_wood.png", "textures/light_wood_v3.png",
                "textures/metal.png", "textures/metal1.png", "textures/wood.png",
                "textures/wood2.png", "textures/wood_light.png", "scene/textures/height1.png",
                "scene/textures/metal.png", "scene/textures/plaster.png",
                "scene/textures/white_marble_tile2.png", "scene/textures/wood.png",
                "scene/textures/wood2.png")
_LABMAZE = {  # labmaze's wall, floor and ceiling textures, by maze style.
    "style_01": ("4tile_d ceiling_d floor_blue_bright_d floor_blue_d floor_blue_team_d "
                 "floor_light_m floor_orange_bright_d floor_orange_d floor_red_team_d wall_blue_d "
                 "wall_cerise_d wall_green_bright_d wall_green_d wall_light_m wall_purple_d "
                 "wall_red_bright_d wall_red_d wall_yellow_d"),
    "style_02": ("floor_blue_bright_d floor_blue_d floor_green_bright_d floor_green_d "
                 "floor_light_m floor_orange_d wall_blue_bright_d wall_blue_d wall_dblue_d "
                 "wall_lgreen_d wall_purple_d wall_yellow_bright_d wall_yellow_d"),
    "style_03": ("floor_blue_bright_d floor_blue_d floor_green_bright_d floor_green_d "
                 "floor_light1_m floor_light2_m floor_light3_m floor_orange_d floor_purple_d "
                 "floor_red_d wall_blue_d wall_cyan_d wall_gray_bright_d wall_gray_d wall_light_m "
                 "wall_orange_bright_d wall_orange_d wall_purple_d"),
    "style_04": ("floor_blue_bright_d floor_blue_d floor_cyan_d floor_dorange_d "
                 "floor_orange_bright_d floor_orange_d wall_cerise_d wall_green_bright_d "
                 "wall_green_d wall_purple_d wall_red_bright_d wall_red_d"),
    "style_05": ("floor_blue_bright_d floor_blue_d floor_light1_m floor_light2_m "
                 "floor_orange_bright_d floor_orange_d wall_red_bright_d wall_red_d "
                 "wall_yellow_bright_d wall_yellow_d"),
}
_PAIRS = (("red", "white"), ("blue", "yellow"), ("black", "lime"), ("teal", "orange"),
          ("magenta", "navy"), ("cyan", "maroon"))


def _image_name(f: str) -> str:
  return os.path.splitext(os.path.basename(f))[0] + ("_s" if "scene/" in f else "")


def _labmaze_textures() -> tuple[Texture, ...]:
  return tuple(Texture(f"labmaze{style[-1]}_{name}", file=f"assets/{style}/{name}.png",
                       package="labmaze")
               for style, names in _LABMAZE.items() for name in names.split())


TEXTURES: tuple[Texture, ...] = (
    tuple(Texture(_image_name(f), file=f) for f in _IMAGES)
    + (Texture("checker_red_white", builtin="checker", rgb1="red", rgb2="white"),
       Texture("checker_blue_yellow", builtin="checker", rgb1="blue", rgb2="yellow"),
       Texture("checker_black_lime", builtin="checker", rgb1="black", rgb2="lime"),
       Texture("checker_teal_orange", builtin="checker", rgb1="teal", rgb2="orange"),
       Texture("gradient_magenta_navy", builtin="gradient", rgb1="magenta", rgb2="navy"),
       Texture("gradient_cyan_maroon", builtin="gradient", rgb1="cyan", rgb2="maroon"),
       Texture("grid_violet_silver", builtin="flat", rgb1="violet", rgb2="silver", mark="edge"),
       Texture("cross_olive_white", builtin="flat", rgb1="olive", rgb2="white", mark="cross"),
       Texture("speckle_rose_black", builtin="flat", rgb1="rose", rgb2="black", mark="random"),
       Texture("speckle_azure_white", builtin="flat", rgb1="azure", rgb2="white",
               mark="random"),
       Texture("speckle_green_gray", builtin="flat", rgb1="green", rgb2="gray",
               mark="random"))
    + tuple(Texture(_image_name(f) + "_2", file=f) for f in _MORE_IMAGES)
    + tuple(Texture(f"{kind}2_{a}_{b}", builtin=kind, rgb1=b, rgb2=a)
            for kind in ("checker", "gradient") for a, b in _PAIRS)
    + _labmaze_textures())


@dataclasses.dataclass(frozen=True)
class Part:
  """One geom of a distractor: a MetaWorld mesh (`mesh` = path under assets/objects/meshes)
  or a primitive (`kind`: box, sphere, cylinder, capsule, ellipsoid) with MuJoCo `size`. A mesh
  with `fit` > 0 is scaled so that its largest extent is `fit` metres and set on the table."""
  kind: str
  size: tuple[float, ...] = ()
  mesh: str = ""
  pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
  colour: str = "gray"
  fit: float = 0.0


# Single MetaWorld meshes used as distractors, each scaled to ~10 cm: the visual meshes of its
# objects (not the collision ones, the table's or the robot's), less thin plates (< 1 cm),
# panes and repeats.
_MESH_DISTRACTORS = (
    "assembly_peg/assembly_peg_handle", "assembly_peg/assembly_peg_ring",
    "assembly_peg/assembly_peg_rod", "basketball/backboard", "basketball/basketballouter",
    "basketball/hoop", "basketball/pole", "bin/bin", "block/block", "box/boxhandle",
    "box/boxtop", "buttonbox/button", "buttonbox/buttonring", "buttonbox/stopbot",
    "buttonbox/stopbutton", "buttonbox/stopbuttonrod", "buttonbox/stoptop",
    "coffeemachine/body1", "coffeemachine/body2", "coffeemachine/cup", "coffeemachine/handle",
    "coffeemachine/spout", "doorlock/door", "doorlock/door_handle", "doorlock/handle",
    "doorlock/handle_base", "doorlock/lock", "doorlock/lock_base", "doorlock/safe",
    "drawer/drawer", "drawer/drawercase", "drawer/drawerhandle", "faucet/faucetbase",
    "faucet/faucethandle1", "faucet/faucethead", "golf_club/club_handle", "golf_club/club_head",
    "hammer/hammerblock", "hammer/hammerhandle", "hammer/hammerhead", "hammer/nail",
    "handle_press/handle_press_base", "handle_press/handle_press_grip",
    "handle_press/handle_press_lever", "handle_press/handle_press_trim", "lever/lever_base",
    "lever/lever_handle", "lever/lever_rodbase", "peg_block/block_outer", "plug/plug",
    "plug/plug_head", "plug/plug_wall", "puck/goal_net", "shelf/shelf", "shelfb/shelf_frame",
    "soccer/soccer_frame", "thermos/therm_base", "thermos/therm_handle")
_MESH_COLOURS = ("silver", "red", "blue", "yellow", "green", "orange", "purple", "teal",
                 "white", "maroon", "navy", "olive", "gray", "rose", "azure", "lime")


DISTRACTORS: dict[str, tuple[Part, ...]] = {
    "thermos": (Part("mesh", mesh="thermos/therm_body.stl", colour="silver"),
                Part("mesh", mesh="thermos/therm_cap.stl", colour="black")),
    "dial": (Part("mesh", mesh="dial/dial.stl", colour="gray"),
             Part("mesh", mesh="dial/dialhead.stl", colour="red")),
    "puck": (Part("mesh", mesh="puck/puck.stl", colour="black"),),
    "soccer_ball": (Part("mesh", mesh="soccer/soccer_white.stl", colour="white"),
                    Part("mesh", mesh="soccer/soccer_black.stl", colour="black")),
    "stick": (Part("mesh", mesh="stick/stick.stl", colour="orange"),),
    "cube": (Part("box", (0.03, 0.03, 0.03), pos=(0, 0, 0.03), colour="yellow"),),
    "ball": (Part("sphere", (0.035,), pos=(0, 0, 0.035), colour="cyan"),),
    "can": (Part("cylinder", (0.03, 0.05), pos=(0, 0, 0.05), colour="maroon"),),
    "bottle": (Part("cylinder", (0.025, 0.06), pos=(0, 0, 0.06), colour="green"),
               Part("cylinder", (0.01, 0.025), pos=(0, 0, 0.14), colour="green")),
    "mug": (Part("cylinder", (0.035, 0.04), pos=(0, 0, 0.04), colour="blue"),
            Part("capsule", (0.008, 0.02), pos=(0.045, 0, 0.04), colour="blue")),
    "egg": (Part("ellipsoid", (0.025, 0.025, 0.035), pos=(0, 0, 0.035), colour="white"),),
    "dumbbell": (Part("capsule", (0.01, 0.04), pos=(0, 0, 0.02), colour="gray"),
                 Part("sphere", (0.022,), pos=(0, 0, 0.07), colour="purple"),
                 Part("sphere", (0.022,), pos=(0, 0, -0.03), colour="purple")),
    **{f"mw_{m.replace('/', '_')}": (Part("mesh", mesh=f"{m}.stl", fit=0.1,
                                          colour=_MESH_COLOURS[i % len(_MESH_COLOURS)]),)
       for i, m in enumerate(_MESH_DISTRACTORS)},
}
