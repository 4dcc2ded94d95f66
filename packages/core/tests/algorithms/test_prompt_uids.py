"""Groups are named in one place (`rl.core.algorithms.groups.prompt_uids`)."""

from rl.core.algorithms.groups import group_index, group_rows, prompt_uids


def test_a_steps_prompts_name_their_n_rows_alike():
    assert prompt_uids(3, [7, 2], 2) == ["3-7", "3-7", "3-2", "3-2"]
    assert group_index(prompt_uids(3, [7, 2], 2)).tolist() == [0, 0, 1, 1]


def test_the_same_prompt_in_two_draws_of_dynamic_sampling_is_two_groups():
    first, second = prompt_uids(3, [7], 2, draw=0), prompt_uids(3, [7], 2, draw=1)
    assert first == ["3-0-7", "3-0-7"] and second == ["3-1-7", "3-1-7"]
    assert group_index(first + second).tolist() == [0, 0, 1, 1]
    assert set(first).isdisjoint(prompt_uids(3, [7], 2))  # nor a plain step's group


def test_a_groups_rows():
    assert list(group_rows(0, 3)) == [0, 1, 2] and list(group_rows(2, 3)) == [6, 7, 8]
