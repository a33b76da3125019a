"""Loaders of the datasets G-VUE uses, in the formats they are distributed in, for users who have
the files (vcbench downloads nothing; the paths come from the config, `real_paths.<task>`).

`LOADERS[task](root, split, size, limit=None, **paths)` reads one split into the data contract
(`split.py`): images resized to size x size (bilinear; depth and label maps nearest neighbour;
boxes normalised), the first `limit` examples in file order, checked by `split.check`. A
malformed file raises `FormatError` and a missing one `MissingFile` (both `UserError`s), naming
the file and the field or line. The G-VUE job asks for "train" and "test"; "test" reads the
split G-VUE reports, and a dataset's own split names work too.

  task                   dataset (test split)        files, under `root` unless passed
  depth_estimation       NYUv2, BTS layout (test)    nyudepthv2_{train,test}_files_with_gt.txt
                                                     (`index_file`; lines "rgb depth [focal]"),
                                                     RGB JPEG/PNG + uint16 PNG depth in mm
  camera_pose            Cambridge Landmarks or      <scene>/dataset_{train,test}.txt, or
                         7-Scenes, one `scene`       7Scenes_PoseNet_TrainVal/<scene>_{train,val}
                         (test)                      .txt (`pose_file`): 3 header lines, then
                                                     "image x y z w p q r"; images in <scene>/
  reconstruction_3d      ShapeNet, DISN split +      info.json, filelists/<synset>_{train,test}
                         AutoSDF SDFs (test)         .lst, ShapeNetRendering/<synset>/<model>/
                                                     rendering/NN.png, x/<synset>/<model>/x.npy
  image_text_retrieval   Flickr30k, Karpathy split   dataset_flickr30k.json (`annotations`; or
                         (test)                      ALBEF's flickr30k_<split>.json),
                                                     flickr30k-images/ (`image_dir`)
  phrase_grounding       RefCOCO, UNC split (val;    refs(unc).p, instances.json, images/
                         also testA, testB)          (COCO train2014)
  semantic_segmentation  ADE20K SceneParsing (val)   images/{training,validation}/*.jpg,
                                                     annotations/.../*.png (`index_file`: CSAIL's
                                                     ADE20K_object150_<split>.txt, optional)
  vqa                    GQA balanced (testdev)      {train,val,testdev}_balanced_questions.json,
                                                     images/<imageId>.jpg, `answers_file`
                                                     (optional: built from the three files)
  commonsense_reasoning  VCR Q->A (val)              {train,val}.jsonl, vcr1images/ (images and
                                                     metadata JSON)
  abstract_reasoning     Bongard-HOI (test)          bongard_hoi_train.json, bongard_hoi_{val,
                                                     test}_<task>.json, images/

Each loader's docstring gives its options; the modules' docstrings give the choices made where
G-VUE's reading and the contract differ.
"""
from __future__ import annotations

from vcbench.data.gvue.formats_ground import (load_image_text_retrieval, load_phrase_grounding,
                                              load_semantic_segmentation)
# FormatError, MissingFile and build_gqa_answers are re-exported for users of this module.
from vcbench.data.gvue.formats_io import FormatError, MissingFile  # noqa: F401
from vcbench.data.gvue.formats_perceive import (load_camera_pose, load_depth_estimation,
                                                load_reconstruction_3d)
from vcbench.data.gvue.formats_reason import build_gqa_answers  # noqa: F401
from vcbench.data.gvue.formats_reason import load_abstract_reasoning, load_vqa
from vcbench.data.gvue.formats_vcr import load_commonsense_reasoning
from vcbench.registry import Registry

LOADERS = Registry("G-VUE real-format loader")
LOADERS.register("depth_estimation")(load_depth_estimation)
LOADERS.register("camera_pose")(load_camera_pose)
LOADERS.register("reconstruction_3d")(load_reconstruction_3d)
LOADERS.register("image_text_retrieval")(load_image_text_retrieval)
LOADERS.register("phrase_grounding")(load_phrase_grounding)
LOADERS.register("semantic_segmentation")(load_semantic_segmentation)
LOADERS.register("vqa")(load_vqa)
LOADERS.register("commonsense_reasoning")(load_commonsense_reasoning)
LOADERS.register("abstract_reasoning")(load_abstract_reasoning)
