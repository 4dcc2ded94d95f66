"""Images in an RL run of a vision-language model: read from the data file, processed
as the model's processor does (`processing`), carried with each row's prompt to the
rollout engine and into every forward pass of the trainer (`inputs`), at the model's
multimodal rotary positions (`rope`)."""

from rl.core.vision.inputs import ImageInputs, image_batch, images_of_rows
from rl.core.vision.rope import mrope_positions

__all__ = ["ImageInputs", "image_batch", "images_of_rows", "mrope_positions"]
