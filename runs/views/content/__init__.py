"""What the pages show, signed in or shared alike: a run's or an experiment's page
(`context`), a comparison's (`comparing`) and an adaptive experiment's spending of
repeats (`adaptive`). Built from the lab's data; the views around them only answer."""
